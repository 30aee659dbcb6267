package scheduler

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/regressd/regressd/schemas"
)

// ResolveWindow applies the window rules: start and end as given; start alone
// → [start, now); end alone → [end−window, end); neither → [now−window, now).
// "now" is the fire time of a scheduled run, in UTC.
func ResolveWindow(start, end *time.Time, window time.Duration, now time.Time) (time.Time, time.Time, error) {
	now = now.UTC()
	var s, e time.Time
	switch {
	case start != nil && end != nil:
		s, e = start.UTC(), end.UTC()
	case start != nil:
		s, e = start.UTC(), now
	case end != nil:
		e = end.UTC()
		s = e.Add(-window)
	default:
		s, e = now.Add(-window), now
	}
	if !s.Before(e) {
		return s, e, fmt.Errorf("start_time %s is not before end_time %s", s.Format(time.RFC3339), e.Format(time.RFC3339))
	}
	// A window reaching outside years 1 … 9999 cannot be written as a
	// timestamp (the job's JSON, PostgreSQL's bounds): refused here, not
	// failed later as a server error.
	if s.Year() < 1 || e.Year() > 9999 {
		return s, e, fmt.Errorf("the window [%s, %s) reaches outside the years 1 to 9999: choose a start_time, end_time or window inside them", s.Format(time.RFC3339), e.Format(time.RFC3339))
	}
	return s, e, nil
}

// timeLayouts are the ISO 8601 forms a time may take: RFC 3339, a date and
// time without a zone (UTC), with or without seconds and their fraction,
// a date.
var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02T15:04Z07:00", "2006-01-02T15:04", "2006-01-02"}

// ParseTime reads a time in one of timeLayouts, in UTC. A space may stand
// for the 'T' between date and time ("2026-01-02 15:04:05Z"), as Python's
// isoformat and PostgreSQL write it.
func ParseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if len(s) > 10 && s[10] == ' ' {
		s = s[:10] + "T" + strings.TrimLeft(s[11:], " ")
	}
	for _, layout := range timeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not an ISO 8601 timestamp (e.g. 2026-01-02T15:04:05Z or 2026-01-02 15:04:05)", s)
}

// ParseWhen reads a time as ParseTime does, or a duration before now
// ("7d", "36h").
func ParseWhen(s string, now time.Time) (time.Time, error) {
	if t, err := ParseTime(s); err == nil {
		return t, nil
	}
	if d, err := schemas.ParseDuration(s); err == nil {
		return now.Add(-time.Duration(d)).UTC(), nil
	}
	return time.Time{}, errors.New("want RFC 3339 (2026-01-02T15:04:05Z), a date (2026-01-02) or a duration ago (7d)")
}
