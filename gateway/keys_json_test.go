package gateway

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A key's JSON names it by its public id; a usage row adds up its tokens
// and names its day only when it is a per-day row.
func TestKeyAndUsageJSON(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b, _ := json.Marshal(Key{ID: 7, Name: "ci", LookupID: "abc123", Created: created})
	if got, want := string(b), `{"name":"ci","key_id":"rgd_abc123","created":"2026-01-02T03:04:05Z","revoked":null,"last_used":null}`; got != want {
		t.Errorf("key JSON %s, want %s", got, want)
	}
	row := UsageRow{Name: "ci", LookupID: "abc123", Model: "m", Requests: 2, InputTokens: 10, OutputTokens: 5}
	b, _ = json.Marshal(row)
	if s := string(b); !strings.Contains(s, `"total_tokens":15`) || strings.Contains(s, `"day"`) || !strings.Contains(s, `"key_id":"rgd_abc123"`) {
		t.Errorf("usage JSON %s", s)
	}
	row.Day = created.Truncate(24 * time.Hour)
	if b, _ = json.Marshal(row); !strings.HasPrefix(string(b), `{"day":"2026-01-02",`) {
		t.Errorf("per-day usage JSON %s", b)
	}
}
