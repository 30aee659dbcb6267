package scheduler

import (
	"maps"
	"strings"
	"testing"
	"unicode/utf8"
)

// The fuzz targets run their seeds in every `go test`; fuzz for longer by hand:
//   go test ./scheduler -run '^$' -fuzz FuzzResolveArgs -fuzztime 1m

var argSeeds = []string{
	base,
	"",
	",,,",
	"=",
	"measurement=m,field=y,feature_fields=a a b,model=v/m,tags=host:a zone:b,window=2w,min_history=1,max_train_rows=1",
	"measurement=we\"ird;DROP TABLE x;--,field=tëmp,feature_fields=\"a\" b;c,model=v/m",
	"measurement=温度,field=値,feature_fields=x,model=v/m,skip_existing=NO",
	"api_key=secret,measurement=m",
	"window=-1d,request_timeout=0s,max_retries=99999999999999999999",
	"tags=:,tags2=a:b",
	"feature_fields=time __target y,field=y",
	"measurement=" + strings.Repeat("m", 60) + ",field=y",
	"measurement=a\x00b,field=y",
	"k=v=w, k2 = v2 ,batch_size=3",
}

func FuzzSplitArgs(f *testing.F) {
	for _, s := range argSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := SplitArgs(s)
		if err != nil {
			return
		}
		// What splits cleanly survives a round trip through FormatArgs.
		again, err := SplitArgs(FormatArgs(m))
		if err != nil {
			t.Fatalf("SplitArgs(FormatArgs(%q)): %v", m, err)
		}
		if !maps.Equal(m, again) {
			t.Fatalf("round trip changed %q into %q", m, again)
		}
	})
}

func FuzzResolveArgs(f *testing.F) {
	for _, s := range argSeeds {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, partial bool) {
		m, err := SplitArgs(s)
		if err != nil {
			return
		}
		r, err := ResolveArgs(m, partial, nil)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error with no message")
			}
			return
		}
		// What validates is safe to hand to the producer.
		if !partial && (r.Measurement == "" || r.Field == "" || len(r.FeatureFields) == 0 || r.Model == "") {
			t.Fatalf("accepted without a required argument: %+v", r)
		}
		for _, id := range append([]string{r.Measurement, r.Field}, r.FeatureFields...) {
			if strings.ContainsRune(id, 0) || len(id) > 63 {
				t.Fatalf("accepted identifier %q that PostgreSQL cannot hold", id)
			}
		}
		for _, f := range r.FeatureFields {
			if f == r.Field || f == "time" {
				t.Fatalf("accepted feature %q (target %q)", f, r.Field)
			}
		}
		if r.Window <= 0 || r.RequestTimeout <= 0 || r.MinHistory < 1 || r.MaxTrainRows < r.MinHistory ||
			r.PredictBatchSize < 1 || r.MaxPredictRows < 1 || r.MaxReadRows < 1 || r.MaxRetries < 1 {
			t.Fatalf("accepted out-of-range numbers: %+v", r)
		}
		if _, ok := m["api_key"]; ok {
			t.Fatal("accepted api_key")
		}
	})
}

func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"request:x", "every:15m", "every:1d", "cron:0 */6 * * *", "cron:@hourly", "every:0s", "cron:", "request:a/b", ":", "every:1ms"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := ParseSpec(s)
		if err != nil {
			return
		}
		switch ps.Kind {
		case SpecRequest:
			if !nameRE.MatchString(ps.Path) {
				t.Fatalf("accepted request path %q", ps.Path)
			}
		case SpecEvery, SpecCron:
			if ps.Schedule == nil {
				t.Fatalf("%q: no schedule", s)
			}
		default:
			t.Fatalf("%q: kind %q", s, ps.Kind)
		}
		if !utf8.ValidString(ps.Path) {
			t.Fatalf("path %q is not UTF-8", ps.Path)
		}
	})
}
