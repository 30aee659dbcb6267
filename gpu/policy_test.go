package gpu

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

func f64(v float64) *float64 { return &v }
func i64(v int64) *int64     { return &v }
func iptr(v int) *int        { return &v }

// sameValues compares the exported fields only (the set-mask is bookkeeping).
func sameValues(a, b Policy) bool {
	a.set, b.set = 0, 0
	return reflect.DeepEqual(a, b)
}

func TestDefaultPolicyMatchesSeed(t *testing.T) {
	p := DefaultPolicy()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"cache":true,"cache_dtype":"bf16","allow_quantization":true,"gpu_budget_frac":0.4,"gpu_budget_absolute_gb":null,"offload_to_host":true,"host_budget_frac":0.25,"host_budget_absolute_gb":null,"elements_budget":null,"adaptive_query_chunk":true,"context_row_chunk":null,"allow_subsample":true,"stream_context":false}`
	if got := string(b); got != want {
		t.Fatalf("default policy JSON\n got %s\nwant %s", got, want)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("default policy invalid: %v", err)
	}
}

func TestParsePolicyAccepts(t *testing.T) {
	mod := func(f func(*Policy)) Policy { p := DefaultPolicy(); f(&p); return p }
	tests := []struct {
		name string
		raw  string
		want Policy
		set  []string
	}{
		{"empty", ``, DefaultPolicy(), nil},
		{"null", ` null `, DefaultPolicy(), nil},
		{"empty object", `{}`, DefaultPolicy(), nil},
		{"exact", `"exact"`, mod(func(p *Policy) { p.AllowQuantization = false }), []string{"allow_quantization"}},
		{"max_context", `"max_context"`, mod(func(p *Policy) { p.CacheDType = "int8" }), []string{"cache_dtype"}},
		{"off", `"off"`, mod(func(p *Policy) { p.Cache = false }), []string{"cache"}},
		{"off as object", `{"cache": false}`, mod(func(p *Policy) { p.Cache = false }), []string{"cache"}},
		{"cache=false with non-cache fields", `{"cache": false, "allow_subsample": false, "adaptive_query_chunk": false, "elements_budget": 1000}`,
			mod(func(p *Policy) {
				p.Cache, p.AllowSubsample, p.AdaptiveQueryChunk, p.ElementsBudget = false, false, false, i64(1000)
			}), []string{"cache", "allow_subsample", "adaptive_query_chunk", "elements_budget"}},
		{"null field means default", `{"gpu_budget_absolute_gb": null, "cache": null}`, DefaultPolicy(), nil},
		{"every field", `{"cache": true, "cache_dtype": "int8", "allow_quantization": true, "gpu_budget_frac": 1,
			"gpu_budget_absolute_gb": 2.5, "offload_to_host": true, "host_budget_frac": 0.5, "host_budget_absolute_gb": 0,
			"elements_budget": 1e6, "adaptive_query_chunk": false, "context_row_chunk": 512.0, "allow_subsample": false}`,
			Policy{Cache: true, CacheDType: "int8", AllowQuantization: true, GPUBudgetFrac: 1, GPUBudgetAbsoluteGB: f64(2.5),
				OffloadToHost: true, HostBudgetFrac: 0.5, HostBudgetAbsoluteGB: f64(0), ElementsBudget: i64(1000000),
				AdaptiveQueryChunk: false, ContextRowChunk: iptr(512), AllowSubsample: false},
			[]string{"cache", "cache_dtype", "allow_quantization", "gpu_budget_frac", "gpu_budget_absolute_gb", "offload_to_host",
				"host_budget_frac", "host_budget_absolute_gb", "elements_budget", "adaptive_query_chunk", "context_row_chunk", "allow_subsample"}},
		{"explicit default value counts as set", `{"cache_dtype": "bf16"}`, DefaultPolicy(), []string{"cache_dtype"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePolicy([]byte(tt.raw))
			if err != nil {
				t.Fatalf("ParsePolicy(%s): %v", tt.raw, err)
			}
			if !sameValues(p, tt.want) {
				t.Fatalf("ParsePolicy(%s)\n got %+v\nwant %+v", tt.raw, p, tt.want)
			}
			var set []string
			for _, f := range policyFieldNames {
				if p.set&f.bit != 0 {
					set = append(set, f.name)
				}
			}
			if strings.Join(set, ",") != strings.Join(sortedLike(tt.set), ",") {
				t.Fatalf("set fields = %v, want %v", set, tt.set)
			}
		})
	}
}

// sortedLike orders names as policyFieldNames does.
func sortedLike(names []string) []string {
	var out []string
	for _, f := range policyFieldNames {
		for _, n := range names {
			if n == f.name {
				out = append(out, n)
			}
		}
	}
	return out
}

func TestParsePolicyRejects(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want []string // substrings that must all appear in the error
		n    int      // number of problems
	}{
		{"unknown preset", `"fast"`, []string{`unknown preset "fast"`, "exact, max_context, off"}, 1},
		{"preset case matters", `"Exact"`, []string{`unknown preset "Exact"`}, 1},
		{"number", `0.4`, []string{"preset string", "got a number"}, 1},
		{"array", `["exact"]`, []string{"got an array"}, 1},
		{"boolean", `true`, []string{"got a boolean"}, 1},
		{"malformed", `{"cache": tru`, []string{"malformed object"}, 1},
		{"unknown field", `{"cache": true, "speed": "fast"}`, []string{`unknown field "speed"`}, 1},
		{"unknown field with suggestion", `{"gpu_budget_fraction": 0.3}`, []string{`unknown field "gpu_budget_fraction"`, `did you mean "gpu_budget_frac"`}, 1},
		{"wrong case suggests", `{"Cache": false}`, []string{`unknown field "Cache"`, `did you mean "cache"`}, 1},
		{"memory report passed back", `{"rung": "resident_bf16", "est_cache_gb": 0.01, "resident_gb": 0.01, "query_chunk": 512, "cache": true}`,
			[]string{"a memory_report was passed back as memory_policy", "rung", "est_cache_gb"}, 1},
		{"report with clamped", `{"clamped": [], "notes": []}`, []string{"memory_report was passed back"}, 1},
		{"bool as string", `{"cache": "false"}`, []string{"cache: want true or false, got a string"}, 1},
		{"frac as string", `{"gpu_budget_frac": "0.4"}`, []string{"gpu_budget_frac: want a number, got a string"}, 1},
		{"dtype as number", `{"cache_dtype": 8}`, []string{`cache_dtype: want "bf16" or "int8", got a number`}, 1},
		{"elements fractional", `{"elements_budget": 1.5}`, []string{"elements_budget: want an integer, got a number"}, 1},
		{"chunk as bool", `{"context_row_chunk": true}`, []string{"context_row_chunk: want an integer, got a boolean"}, 1},
		{"elements past int64", `{"elements_budget": 1e30}`, []string{"elements_budget: 1e30 is out of range"}, 1},
		{"elements as a numeric string", `{"elements_budget": "100"}`, []string{"elements_budget: want an integer, got a string"}, 1},
		{"chunk as a numeric string", `{"context_row_chunk": "16"}`, []string{"context_row_chunk: want an integer, got a string"}, 1},
		{"absolute as object", `{"host_budget_absolute_gb": {"gb": 1}}`, []string{"host_budget_absolute_gb: want a number, got an object"}, 1},
		{"cache off with cache-only", `{"cache": false, "cache_dtype": "int8", "gpu_budget_frac": 0.2}`,
			[]string{"cache=false with cache-only field(s) cache_dtype, gpu_budget_frac"}, 1},
		{"cache off with offload and chunk", `{"cache": false, "offload_to_host": true, "context_row_chunk": 64}`,
			[]string{"offload_to_host, context_row_chunk"}, 1},
		{"cache off with explicit default dtype", `{"cache": false, "cache_dtype": "bf16"}`, []string{"cache-only field(s) cache_dtype"}, 1},
		{"int8 without quantization", `{"cache_dtype": "int8", "allow_quantization": false}`, []string{`cache_dtype="int8" with allow_quantization=false`}, 1},
		{"bad dtype", `{"cache_dtype": "fp8"}`, []string{`cache_dtype: "fp8" is not "bf16" or "int8"`}, 1},
		{"frac zero", `{"gpu_budget_frac": 0}`, []string{"gpu_budget_frac: 0 is outside (0, 1]", "gpu_budget_absolute_gb=0"}, 1},
		{"frac above one", `{"host_budget_frac": 1.5}`, []string{"host_budget_frac: 1.5 is outside (0, 1]"}, 1},
		{"frac negative", `{"gpu_budget_frac": -0.1}`, []string{"gpu_budget_frac: -0.1 is outside"}, 1},
		{"negative absolute", `{"gpu_budget_absolute_gb": -1}`, []string{"gpu_budget_absolute_gb: -1 is not a size"}, 1},
		{"negative host absolute", `{"host_budget_absolute_gb": -0.5}`, []string{"host_budget_absolute_gb: -0.5"}, 1},
		{"zero elements", `{"elements_budget": 0}`, []string{"elements_budget: 0 is not a positive count"}, 1},
		{"negative elements", `{"elements_budget": -10}`, []string{"elements_budget: -10"}, 1},
		{"negative chunk", `{"context_row_chunk": -1}`, []string{"context_row_chunk: -1 is not a positive row count"}, 1},
		{"huge chunk", `{"context_row_chunk": 1e12}`, []string{"context_row_chunk: 1000000000000 is out of range"}, 1},
		{"everything at once", `{"cache": false, "cache_dtype": "int8", "allow_quantization": false, "gpu_budget_frac": 2,
			"elements_budget": -1, "bogus": 1, "context_row_chunk": "x"}`,
			[]string{"context_row_chunk: want an integer", `unknown field "bogus"`, "cache=false with cache-only",
				`cache_dtype="int8" with allow_quantization=false`, "gpu_budget_frac: 2 is outside", "elements_budget: -1"}, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePolicy([]byte(tt.raw))
			if err == nil {
				t.Fatalf("ParsePolicy(%s) succeeded, want error", tt.raw)
			}
			if !errors.Is(err, ErrInvalidPolicy) {
				t.Fatalf("error %v does not match ErrInvalidPolicy", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			var pe *PolicyError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not a *PolicyError", err)
			}
			if got := len(pe.Problems); got != tt.n {
				t.Errorf("problems=%d, want %d: %q", got, tt.n, pe.Problems)
			}
		})
	}
}

func TestValidateGoBuiltPolicy(t *testing.T) {
	p := DefaultPolicy()
	p.Cache = false
	if err := p.Validate(); err != nil {
		t.Fatalf("cache off alone: %v", err)
	}
	p.CacheDType = CacheDTypeInt8 // differs from default, so counts as set
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "cache_dtype") {
		t.Fatalf("cache off with int8: err=%v, want cache-only complaint", err)
	}
	if err := (Policy{}).Validate(); err == nil {
		t.Fatal("zero Policy validated; it should not (zero budgets, empty dtype)")
	}
}

func TestWireJSONRoundTrip(t *testing.T) {
	cases := []string{`{}`, `"exact"`, `"max_context"`, `"off"`,
		`{"cache": false, "allow_subsample": false}`,
		`{"gpu_budget_absolute_gb": 3, "gpu_budget_frac": 0.4, "context_row_chunk": 128}`,
		`{"cache_dtype": "bf16"}`}
	for _, raw := range cases {
		p, err := ParsePolicy([]byte(raw))
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		w, err := p.WireJSON()
		if err != nil {
			t.Fatal(err)
		}
		q, err := ParsePolicy(w)
		if err != nil {
			t.Fatalf("%s → %s: %v", raw, w, err)
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("%s → %s → %+v, want %+v", raw, w, q, p)
		}
	}
	// A Go-built policy sends only what differs from the defaults, so
	// cache=false does not drag the default dtype along with it.
	p := DefaultPolicy()
	p.Cache = false
	w, _ := p.WireJSON()
	if got, want := string(w), `{"cache":false}`; got != want {
		t.Fatalf("wire=%s, want %s", got, want)
	}
	if w, _ := DefaultPolicy().WireJSON(); string(w) != `{}` {
		t.Fatalf("default wire=%s, want {}", w)
	}
}

func TestBudgetBytes(t *testing.T) {
	const gib = int64(1) << 30
	mod := func(f func(*Policy)) Policy { p := DefaultPolicy(); f(&p); return p }
	tests := []struct {
		name         string
		p            Policy
		device, host int64
		gpu, hostB   int64
	}{
		{"defaults", DefaultPolicy(), 80 * gib, 100 * gib, 32 * gib, 25 * gib},
		{"unknown device assumes 24GiB", DefaultPolicy(), 0, 0, frac(0.4, 24*gib), 0},
		{"unknown host disables fractional offload", DefaultPolicy(), 10 * gib, 0, 4 * gib, 0},
		{"absolute wins", mod(func(p *Policy) { p.GPUBudgetAbsoluteGB = f64(2); p.HostBudgetAbsoluteGB = f64(3) }), 80 * gib, 100 * gib, 2 * gib, 3 * gib},
		{"absolute capped at device and host", mod(func(p *Policy) { p.GPUBudgetAbsoluteGB = f64(100); p.HostBudgetAbsoluteGB = f64(300) }), 8 * gib, 16 * gib, 8 * gib, 16 * gib},
		{"absolute host honoured when host unknown", mod(func(p *Policy) { p.HostBudgetAbsoluteGB = f64(1.5) }), 8 * gib, 0, frac(0.4, 8*gib), gib + gib/2},
		{"offload off means no host budget", mod(func(p *Policy) { p.OffloadToHost = false; p.HostBudgetAbsoluteGB = f64(3) }), 8 * gib, 16 * gib, frac(0.4, 8*gib), 0},
		{"zero GPU budget", mod(func(p *Policy) { p.GPUBudgetAbsoluteGB = f64(0) }), 8 * gib, 16 * gib, 0, 4 * gib},
		{"small device", mod(func(p *Policy) { p.GPUBudgetFrac = 0.5 }), 1000, 4000, 500, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.GPUBudgetBytes(tt.device); got != tt.gpu {
				t.Errorf("GPUBudgetBytes(%d)=%d, want %d", tt.device, got, tt.gpu)
			}
			if got := tt.p.HostBudgetBytes(tt.host); got != tt.hostB {
				t.Errorf("HostBudgetBytes(%d)=%d, want %d", tt.host, got, tt.hostB)
			}
		})
	}
}

func TestClampHost(t *testing.T) {
	const gib = int64(1) << 30
	parse := func(raw string) Policy {
		p, err := ParsePolicy([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name          string
		p             Policy
		host, max     int64
		clamped       []string
		wantHostBytes int64
	}{
		{"defaults within cap", DefaultPolicy(), 64 * gib, 16 * gib, nil, 16 * gib},
		{"no cap", parse(`{"host_budget_frac": 1}`), 64 * gib, 0, nil, 64 * gib},
		{"fraction capped", parse(`{"host_budget_frac": 0.9}`), 64 * gib, 16 * gib, []string{"host_budget_frac"}, 16 * gib},
		{"default fraction capped too", DefaultPolicy(), 64 * gib, 8 * gib, []string{"host_budget_frac"}, 8 * gib},
		{"absolute capped", parse(`{"host_budget_absolute_gb": 100}`), 64 * gib, 16 * gib, []string{"host_budget_absolute_gb"}, 16 * gib},
		{"absolute within cap", parse(`{"host_budget_absolute_gb": 4}`), 64 * gib, 16 * gib, nil, 4 * gib},
		{"absolute capped with unknown host", parse(`{"host_budget_absolute_gb": 100}`), 0, 16 * gib, []string{"host_budget_absolute_gb"}, 16 * gib},
		{"offload off untouched", parse(`{"offload_to_host": false, "host_budget_absolute_gb": 100}`), 64 * gib, 16 * gib, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, clamped := tt.p.ClampHost(tt.host, tt.max)
			if !reflect.DeepEqual(clamped, tt.clamped) {
				t.Fatalf("clamped=%v, want %v", clamped, tt.clamped)
			}
			if b := got.HostBudgetBytes(tt.host); b != tt.wantHostBytes {
				t.Fatalf("host budget after clamp=%d, want %d", b, tt.wantHostBytes)
			}
			if got.set != tt.p.set {
				t.Fatal("ClampHost changed which fields count as set")
			}
			if err := got.Validate(); err != nil {
				t.Fatalf("clamped policy invalid: %v", err)
			}
		})
	}
}

func TestNotes(t *testing.T) {
	const gib = int64(1) << 30
	tests := []struct {
		name         string
		raw          string
		device, host int64
		want         []string // one substring per expected note, in order
	}{
		{"defaults say nothing", `null`, 24 * gib, 64 * gib, nil},
		{"presets say nothing", `"exact"`, 24 * gib, 64 * gib, nil},
		{"off says nothing", `"off"`, 24 * gib, 64 * gib, nil},
		{"max_context says nothing", `"max_context"`, 24 * gib, 64 * gib, nil},
		{"gpu frac and absolute", `{"gpu_budget_frac": 0.3, "gpu_budget_absolute_gb": 2}`, 24 * gib, 64 * gib,
			[]string{"gpu_budget_frac and gpu_budget_absolute_gb are both set: the absolute 2 GiB wins"}},
		{"host frac and absolute", `{"host_budget_frac": 0.3, "host_budget_absolute_gb": 20}`, 24 * gib, 64 * gib,
			[]string{"host_budget_frac and host_budget_absolute_gb are both set"}},
		{"host budgets with offload off", `{"offload_to_host": false, "host_budget_frac": 0.5}`, 24 * gib, 64 * gib,
			[]string{"host budgets are set but offload_to_host=false"}},
		{"zero gpu without offload", `{"offload_to_host": false, "gpu_budget_absolute_gb": 0}`, 24 * gib, 64 * gib,
			[]string{"the GPU budget is 0 and offload_to_host=false"}},
		{"zero gpu with offload", `{"gpu_budget_absolute_gb": 0}`, 24 * gib, 64 * gib,
			[]string{"gpu_budget_absolute_gb=0: the cache is never resident"}},
		{"host at or below gpu", `{"host_budget_absolute_gb": 4}`, 24 * gib, 64 * gib,
			[]string{"the host budget (4 GiB) is at or below the GPU budget (9.6 GiB)"}},
		{"host budget zero", `{"host_budget_absolute_gb": 0}`, 24 * gib, 64 * gib,
			[]string{"the host budget is 0: offload never happens"}},
		{"gpu absolute above device", `{"gpu_budget_absolute_gb": 100}`, 24 * gib, 512 * gib,
			[]string{"more than the device's 24 GiB", "the GPU budget is the whole device"}},
		{"gpu absolute above assumed device", `{"gpu_budget_absolute_gb": 100}`, 0, 512 * gib,
			[]string{"(assumed; the device size is unknown)", "whole device"}},
		{"whole device fraction", `{"gpu_budget_frac": 1}`, 24 * gib, 512 * gib, []string{"the GPU budget is the whole device"}},
		{"host absolute above RAM", `{"host_budget_absolute_gb": 1000}`, 24 * gib, 64 * gib, []string{"more than the host's 64 GiB of RAM"}},
		{"host unknown", `{"offload_to_host": true}`, 24 * gib, 0, []string{"host RAM is unknown here"}},
		{"exact without offload", `{"allow_quantization": false, "offload_to_host": false}`, 24 * gib, 64 * gib,
			[]string{"allow_quantization=false and offload_to_host=false"}},
		{"redundant quantization", `{"cache_dtype": "int8", "allow_quantization": true}`, 24 * gib, 64 * gib,
			[]string{"allow_quantization=true is redundant"}},
		{"row chunk", `{"context_row_chunk": 256}`, 24 * gib, 64 * gib, []string{"context_row_chunk=256"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePolicy([]byte(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			notes := p.Notes(tt.device, tt.host)
			if len(notes) != len(tt.want) {
				t.Fatalf("notes=%q, want %d matching %q", notes, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(notes[i], w) {
					t.Errorf("note %d %q does not mention %q", i, notes[i], w)
				}
			}
		})
	}
}

func TestIsSet(t *testing.T) {
	p, err := ParsePolicy([]byte(`{"gpu_budget_frac": 0.4}`))
	if err != nil {
		t.Fatal(err)
	}
	if !p.IsSet("gpu_budget_frac") || p.IsSet("host_budget_frac") || p.IsSet("nope") {
		t.Fatalf("IsSet wrong: gpu=%v host=%v nope=%v", p.IsSet("gpu_budget_frac"), p.IsSet("host_budget_frac"), p.IsSet("nope"))
	}
}

func frac(f float64, n int64) int64 { return int64(math.Floor(f * float64(n))) }

func TestSuggestPolicyField(t *testing.T) {
	for in, want := range map[string]string{
		"Cache": "cache", "cache_type": "cache_dtype", "gpu_budget_fraction": "gpu_budget_frac",
		"offload": "offload_to_host", "cache_dtype_x": "cache_dtype", "speed": "", "xyz": "",
		"allow_subsampling": "allow_subsample", "host_budget_abs_gb": "",
	} {
		if got := suggestPolicyField(in); got != want {
			t.Errorf("suggestPolicyField(%q)=%q, want %q", in, got, want)
		}
	}
}
