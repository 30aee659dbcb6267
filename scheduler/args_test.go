package scheduler

import (
	"strings"
	"testing"
	"time"

	"github.com/regressd/regressd/schemas"
)

const base = "measurement=m,field=y,feature_fields=a b,model=regressd/model-x"

func TestResolveArgsDefaults(t *testing.T) {
	args, err := SplitArgs(base)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ResolveArgs(args, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := schemas.RunArgs{Measurement: "m", Field: "y", FeatureFields: []string{"a", "b"}, Model: "regressd/model-x",
		Window: schemas.Duration(30 * 24 * time.Hour), MinHistory: 50, MaxTrainRows: 1000, SkipExisting: true,
		PredictBatchSize: 1000, RequestTimeout: schemas.Duration(300 * time.Second), MaxPredictRows: 5000,
		MaxReadRows: 50000, MaxRetries: 3}
	if got := r; !equalArgs(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func equalArgs(a, b schemas.RunArgs) bool {
	return a.Measurement == b.Measurement && a.Field == b.Field && strings.Join(a.FeatureFields, " ") == strings.Join(b.FeatureFields, " ") &&
		a.Model == b.Model && a.Window == b.Window && a.MinHistory == b.MinHistory && a.MaxTrainRows == b.MaxTrainRows &&
		a.SkipExisting == b.SkipExisting && a.PredictBatchSize == b.PredictBatchSize && a.RequestTimeout == b.RequestTimeout &&
		a.MaxPredictRows == b.MaxPredictRows && a.MaxReadRows == b.MaxReadRows && a.MaxRetries == b.MaxRetries && len(a.Tags) == len(b.Tags)
}

func TestResolveArgsErrors(t *testing.T) {
	cases := []struct {
		name, args string
		partial    bool
		want       []string // every fragment must appear in the one error
	}{
		{"missing required", "field=y", false, []string{`"measurement" is required`, `"feature_fields" is required`, `"model" is required`}},
		{"partial allows missing", "window=7d,model=v/m", true, nil},
		{"partial still needs model", "window=7d", true, []string{`"model" is required: a request body cannot supply it`}},
		{"unknown key lists valid", base + ",colour=red", false, []string{`unknown argument "colour"`, "valid: config_file_path, dry_run, end_time, feature_fields"}},
		{"duplicate key", base + ",window=1d,window=2d", false, []string{`"window" given twice`}},
		{"not key=value", base + ",oops", false, []string{`"oops" is not key=value`}},
		{"bad duration", base + ",window=soon", false, []string{"window: bad duration"}},
		{"duration overflows", base + ",window=100000000000d,request_timeout=1e13h", false, []string{`window: duration "100000000000d" is too large`, `request_timeout: duration "1e13h" is too large`}},
		{"bad int", base + ",min_history=lots", false, []string{"min_history: \"lots\" is not a whole number"}},
		{"int below one", base + ",predict_batch_size=0", false, []string{"predict_batch_size: must be at least 1"}},
		{"bad bool", base + ",skip_existing=maybe", false, []string{"skip_existing"}},
		{"min_history over max_train_rows", base + ",min_history=10,max_train_rows=5", false, []string{"min_history (10) must not exceed max_train_rows (5)"}},
		{"feature is target", "measurement=m,field=y,feature_fields=a y,model=v/m", false, []string{`contains the target "y"`}},
		{"feature is time", "measurement=m,field=y,feature_fields=a time,model=v/m", false, []string{`contains "time"`}},
		{"malformed tags", base + ",tags=host", false, []string{`"host" is not tag_key:tag_value`}},
		{"bad slug", "measurement=m,field=y,feature_fields=a,model=nomodel", false, []string{"not a slug"}},
		{"key refused", base + ",api_key=secret", false, []string{`"api_key" is not accepted`}},
		{"all at once", "field=time,min_history=x,window=0d", false, []string{"measurement", "min_history", "window", `field "time"`}},
		{"long measurement", "measurement=" + strings.Repeat("m", 60) + ",field=y,feature_fields=a,model=v/m", false, []string{"63-byte"}},
		{"long measurement, output named", "measurement=" + strings.Repeat("m", 60) + ",field=y,feature_fields=a,model=v/m,output_measurement=out", false, nil},
		// The plugin's arguments and rules.
		{"retired parameters", base + ",gateway_url=https://x,mode=forecast,tz=UTC", false, []string{`"gateway_url" is not accepted: the gateway is not a parameter`, `"mode" is not accepted: regressd only does regression`, `"tz" is not accepted`}},
		{"output is the source", base + ",output_measurement=m", false, []string{"output_measurement must differ from measurement"}},
		{"system schema", base + ",target_database=pg_catalog", false, []string{"system schema"}},
		{"fixed window", base + ",start_time=2026-01-01 00:00:00,end_time=2026-02-01T00:00:00Z,dry_run=true,window=15min", false, nil},
		{"bad window bounds", base + ",start_time=2026-02-01,end_time=2026-01-01,dry_run=maybe", false, []string{"start_time 2026-02-01T00:00:00Z is not before end_time", "dry_run"}},
		{"bad start", base + ",start_time=soon", false, []string{"start_time: \"soon\" is not an ISO 8601"}},
		{"retired slug", "measurement=m,field=y,feature_fields=a,model=synthefy/nori", false, []string{`model "synthefy/nori" is retired`}},
		{"too many attempts", base + ",max_retries=21", false, []string{"max_retries: at most 20"}},
		{"config file and inline", base + ",config_file_path=a.toml", false, []string{"config_file_path supplies every argument"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args, splitErr := SplitArgs(tc.args)
			_, err := ResolveArgs(args, tc.partial, nil)
			if splitErr != nil {
				err = splitErr
			}
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestFeaturesDeduplicated(t *testing.T) {
	args, _ := SplitArgs("measurement=m,field=y,feature_fields=a b a  c b,model=v/m")
	r, err := ResolveArgs(args, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(r.FeatureFields, ","), "a,b,c"; got != want {
		t.Fatalf("features=%s, want %s", got, want)
	}
}

func TestTagsParsed(t *testing.T) {
	args, _ := SplitArgs(base + ",tags=host:a region:eu-1")
	r, err := ResolveArgs(args, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Tags["host"] != "a" || r.Tags["region"] != "eu-1" || len(r.Tags) != 2 {
		t.Fatalf("tags=%v", r.Tags)
	}
}

func TestModelCheck(t *testing.T) {
	args, _ := SplitArgs(base)
	_, err := ResolveArgs(args, false, func(s string) error {
		if s == "regressd/model-x" {
			return errModel
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "not routable") {
		t.Fatalf("err=%v, want the model check's error", err)
	}
}

var errModel = errorString("model not routable")

type errorString string

func (e errorString) Error() string { return string(e) }

func TestResolveWindow(t *testing.T) {
	now := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	at := func(s string) *time.Time { v, _ := time.Parse(time.RFC3339, s); return &v }
	cases := []struct {
		name       string
		start, end *time.Time
		wantS      time.Time
		wantE      time.Time
		err        bool
	}{
		{"neither", nil, nil, now.Add(-30 * day), now, false},
		{"start only", at("2026-05-01T00:00:00Z"), nil, *at("2026-05-01T00:00:00Z"), now, false},
		{"end only", nil, at("2026-04-30T00:00:00Z"), at("2026-04-30T00:00:00Z").Add(-30 * day), *at("2026-04-30T00:00:00Z"), false},
		{"both", at("2026-01-01T00:00:00Z"), at("2026-02-01T00:00:00Z"), *at("2026-01-01T00:00:00Z"), *at("2026-02-01T00:00:00Z"), false},
		{"start after end", at("2026-02-01T00:00:00Z"), at("2026-01-01T00:00:00Z"), time.Time{}, time.Time{}, true},
		{"start equals end", at("2026-02-01T00:00:00Z"), at("2026-02-01T00:00:00Z"), time.Time{}, time.Time{}, true},
		{"start in the future", at("2027-01-01T00:00:00Z"), nil, time.Time{}, time.Time{}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, e, err := ResolveWindow(tc.start, tc.end, 30*day, now)
			if tc.err {
				if err == nil {
					t.Fatalf("no error for [%s, %s)", s, e)
				}
				return
			}
			if err != nil || !s.Equal(tc.wantS) || !e.Equal(tc.wantE) {
				t.Fatalf("got [%s, %s) err=%v, want [%s, %s)", s, e, err, tc.wantS, tc.wantE)
			}
			if s.Location() != time.UTC || e.Location() != time.UTC {
				t.Fatalf("window not in UTC")
			}
		})
	}
}

func TestParseEngineBody(t *testing.T) {
	pinned := map[string]string{"measurement": "m", "field": "y", "model": "v/m"}
	cases := []struct {
		name, body string
		want       string // error fragment, "" for none
		check      func(t *testing.T, r EngineRequest)
	}{
		{"empty object", `{}`, "", nil},
		{"empty body", ``, "", nil},
		{"nulls mean default", `{"start_time":null,"feature_fields":null,"dry_run":null}`, "", func(t *testing.T, r EngineRequest) {
			if r.Start != nil || r.DryRun || r.Args["feature_fields"] != "" {
				t.Fatalf("nulls were not defaults: %+v", r)
			}
		}},
		{"list and object forms", `{"feature_fields":["a","b"],"tags":{"host":"x"}}`, "", func(t *testing.T, r EngineRequest) {
			if r.Args["feature_fields"] != "a b" || r.Args["tags"] != "host:x" {
				t.Fatalf("args=%v", r.Args)
			}
		}},
		{"times and dry run", `{"start_time":"2026-01-01T00:00:00Z","end_time":"2026-01-02","dry_run":true}`, "", func(t *testing.T, r EngineRequest) {
			if r.Start == nil || r.End == nil || !r.DryRun || r.End.Day() != 2 {
				t.Fatalf("req=%+v", r)
			}
		}},
		{"unknown key", `{"colour":"red"}`, `unknown body key "colour"`, nil},
		{"key in body", `{"api_key":"x"}`, `"api_key" is not accepted`, nil},
		{"pinned", `{"measurement":"other"}`, "measurement is set by the trigger", nil},
		{"bad time", `{"start_time":"yesterday"}`, "not an ISO 8601", nil},
		{"not an object", `[1]`, "JSON object", nil},
		{"bad dry_run", `{"dry_run":"maybe"}`, "dry_run must be true or false", nil},
		{"bad dry_run type", `{"dry_run":2}`, "dry_run must be true or false", nil},
		// The plugin casts body values as it casts arguments.
		{"dry_run as a string", `{"dry_run":"yes"}`, "", func(t *testing.T, r EngineRequest) {
			if !r.DryRun {
				t.Fatalf(`"yes" was not a dry run: %+v`, r)
			}
		}},
		{"dry_run as a number", `{"dry_run":1}`, "", func(t *testing.T, r EngineRequest) {
			if !r.DryRun {
				t.Fatalf(`1 was not a dry run: %+v`, r)
			}
		}},
		{"dry_run false as a string", `{"dry_run":"False"}`, "", func(t *testing.T, r EngineRequest) {
			if r.DryRun {
				t.Fatalf(`"False" was a dry run: %+v`, r)
			}
		}},
		// Only the eight keys; an operator's setting is refused as such.
		{"model in body", `{"model":"v/other"}`, `body key "model" is an operator setting`, nil},
		{"write target in body", `{"output_measurement":"x","target_database":"y"}`, `body key "output_measurement" is an operator setting`, nil},
		{"config file in body", `{"config_file_path":"a.toml"}`, `body key "config_file_path" is an operator setting`, nil},
		{"cap in body", `{"max_train_rows":5}`, `body key "max_train_rows" is an operator setting`, nil},
		{"retired in body", `{"gateway_url":"https://x"}`, `body key "gateway_url" is not accepted: the gateway is not a parameter`, nil},
		{"pinned even as null", `{"measurement":null}`, "measurement is set by the trigger", nil},
		{"names with spaces", `{"feature_fields":["air temp","b"]}`, "", func(t *testing.T, r EngineRequest) {
			a, err := ResolveArgs(r.Args, false, nil)
			if err != nil || len(a.FeatureFields) != 2 || a.FeatureFields[0] != "air temp" {
				t.Fatalf("features %q (%q): %v", a.FeatureFields, r.Args["feature_fields"], err)
			}
		}},
		{"ISO with a space", `{"start_time":"2026-01-01 06:00:00","end_time":"2026-01-02 00:00:00+02:00"}`, "", func(t *testing.T, r EngineRequest) {
			if r.Start == nil || r.Start.Hour() != 6 || r.End == nil || r.End.Hour() != 22 {
				t.Fatalf("req=%+v", r)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseEngineBody([]byte(tc.body), pinned)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if tc.check != nil {
					tc.check(t, r)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err=%v, want %q", err, tc.want)
			}
		})
	}
}

// A trigger's start_time, end_time and dry_run are its run's, and pin them.
func TestWindowAndDryRunAsArguments(t *testing.T) {
	targs := map[string]string{"measurement": "m", "field": "y", "feature_fields": "a", "model": "v/m",
		"start_time": "2026-01-01", "end_time": "2026-01-03", "dry_run": "true"}
	r, err := ParseEngineBody([]byte(`{}`), targs)
	if err != nil || r.Start == nil || r.End == nil || r.End.Day() != 3 || !r.DryRun {
		t.Fatalf("req=%+v err=%v", r, err)
	}
	for _, body := range []string{`{"start_time":"2026-01-02"}`, `{"end_time":"2026-01-02"}`, `{"dry_run":false}`} {
		if _, err := ParseEngineBody([]byte(body), targs); err == nil || !strings.Contains(err.Error(), "set by the trigger's arguments") {
			t.Errorf("%s: err=%v, want the trigger's pin", body, err)
		}
	}
	run, err := ResolveRun(targs, false, nil)
	if err != nil || run.Start == nil || !run.DryRun {
		t.Fatalf("run=%+v err=%v", run, err)
	}
}

func TestParseSpec(t *testing.T) {
	for _, ok := range []string{"request:run_me", "every:15m", "every:1d", "cron:*/5 * * * *", "cron:0 */5 * * * *", "cron:@hourly"} {
		if _, err := ParseSpec(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "request:", "request:a/b", "every:soon", "every:100ms", "cron:61 * * * *", "sometimes:1h"} {
		if _, err := ParseSpec(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// Any tag value can be selected: the object form takes values as sent, and
// the string form reads them percent-escaped.
func TestTagsWithSpacesAndEscapes(t *testing.T) {
	want := map[string]string{"city": "New York", "odd key": "50% off, a:b", "plain": "x"}
	got, err := ParseTags(schemas.FormatTags(want))
	if err != nil || len(got) != len(want) {
		t.Fatalf("round trip of %q: %v %v", schemas.FormatTags(want), got, err)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%q: %q, want %q", k, got[k], v)
		}
	}
	if got, err := ParseTags("city:New%20York"); err != nil || got["city"] != "New York" {
		t.Errorf("escaped string form: %v %v", got, err)
	}
	// A '%' that starts no escape is itself, as before escapes existed.
	if got, err := ParseTags("load:50% code:%4 end:%"); err != nil || got["load"] != "50%" || got["code"] != "%4" || got["end"] != "%" {
		t.Errorf("literal %%: %v %v", got, err)
	}
	s, err := bodyString("tags", []byte(`{"city": "New York"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ParseTags(s); err != nil || got["city"] != "New York" {
		t.Errorf("object form: %q → %v %v", s, got, err)
	}
}
