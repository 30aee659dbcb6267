package gateway

import (
	"encoding/json"
	"time"
)

// The JSON of a key and of a usage row, as 'regressd keys list --json' and
// 'keys usage --json' print them: the key's public id, never its hash.

// KeyID is the key's public id, "rgd_<LookupID>".
func (k Key) KeyID() string { return "rgd_" + k.LookupID }

// MarshalJSON writes the key's name, public id and dates.
func (k Key) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Name     string     `json:"name"`
		KeyID    string     `json:"key_id"`
		Created  time.Time  `json:"created"`
		Revoked  *time.Time `json:"revoked"`
		LastUsed *time.Time `json:"last_used"`
	}{k.Name, k.KeyID(), k.Created, k.Revoked, k.LastUsed})
}

// MarshalJSON writes the row with its key's public id and the total tokens;
// the day only for a per-day row.
func (r UsageRow) MarshalJSON() ([]byte, error) {
	day := ""
	if !r.Day.IsZero() {
		day = r.Day.Format(time.DateOnly)
	}
	return json.Marshal(struct {
		Day          string `json:"day,omitempty"`
		Name         string `json:"name"`
		KeyID        string `json:"key_id"`
		Model        string `json:"model"`
		Requests     int64  `json:"requests"`
		Errors       int64  `json:"errors"`
		ContextRows  int64  `json:"context_rows"`
		QueryRows    int64  `json:"query_rows"`
		InputTokens  int64  `json:"input_tokens"`
		OutputTokens int64  `json:"output_tokens"`
		TotalTokens  int64  `json:"total_tokens"`
	}{day, r.Name, "rgd_" + r.LookupID, r.Model, r.Requests, r.Errors, r.ContextRows, r.QueryRows,
		r.InputTokens, r.OutputTokens, r.InputTokens + r.OutputTokens})
}
