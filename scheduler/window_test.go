package scheduler

import (
	"testing"
	"time"
)

func TestParseWhen(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"2026-01-02T15:04:05Z":      time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC),
		"2026-01-02T15:04:05+01:00": time.Date(2026, 1, 2, 14, 4, 5, 0, time.UTC),
		"2026-01-02T15:04:05":       time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC),
		"2026-01-02":                time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC),
		"7d":                        now.Add(-7 * 24 * time.Hour),
		"36h":                       now.Add(-36 * time.Hour),
	} {
		if got, err := ParseWhen(in, now); err != nil || !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("ParseWhen(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "yesterday", "2026-13-01", "-5m"} {
		if _, err := ParseWhen(bad, now); err == nil {
			t.Errorf("ParseWhen(%q): no error", bad)
		}
	}
	// The engine endpoint takes times, never durations.
	if _, err := ParseTime("7d"); err == nil {
		t.Error(`ParseTime("7d"): no error`)
	}
}
