package gateway

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/tsdb/pgtest"
)

// testModel is a built-in model the tests ask for.
func testModel() string { return gpu.Models()[0].Slug }

// testGateway is our real server on a real port with a real database.
type testGateway struct {
	srv  *Server
	http *httptest.Server
	keys *KeyStore
	key  string // a live key's plaintext
}

func newTestGateway(t *testing.T, cfg Config) *testGateway {
	t.Helper()
	db := pgtest.New(t)
	if cfg.HostMemoryBytes == 0 {
		cfg.HostMemoryBytes = 16 << 30 // deterministic notes and clamps
	}
	srv, err := NewServer(cfg, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	g := &testGateway{srv: srv, http: ts, keys: srv.keys}
	g.key = g.newKey(t, "tester")
	return g
}

func (g *testGateway) newKey(t *testing.T, name string) string {
	t.Helper()
	k, _, err := g.keys.Create(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// post sends body (a string, or anything JSON-encodable) with key.
func (g *testGateway) post(t *testing.T, key string, body any) (int, http.Header, map[string]any) {
	t.Helper()
	var b []byte
	switch v := body.(type) {
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, g.http.URL+"/predict", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	switch {
	case strings.HasPrefix(key, "Bearer "): // a whole header, scheme included
		req.Header.Set("Authorization", key)
	case strings.HasPrefix(key, "raw:"): // a whole header as given
		req.Header.Set("Authorization", strings.TrimPrefix(key, "raw:"))
	case key != "":
		req.Header.Set("Authorization", "Api-Key "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("status %d: body is not JSON: %q", res.StatusCode, data)
	}
	return res.StatusCode, res.Header, out
}

// linearData is y = 2a − b + 0.5 with a few missing cells.
func linearData(nTrain, nTest int) (X [][]float64, y []float64, Xq [][]float64) {
	for i := range nTrain {
		a, b := float64(i%17)/4, float64(i%7)/3
		X = append(X, []float64{a, b})
		y = append(y, 2*a-b+0.5)
	}
	for i := range nTest {
		Xq = append(Xq, []float64{float64(i%13) / 3, float64(i%5) / 2})
	}
	return X, y, Xq
}

// body builds a request object from a linear data set plus overrides.
func body(nTrain, nTest int, extra map[string]any) map[string]any {
	X, y, Xq := linearData(nTrain, nTest)
	b := map[string]any{"model": testModel(), "task": "regression", "X_train": X, "y_train": y, "X_test": Xq}
	for k, v := range extra {
		if v == nil {
			delete(b, k)
		} else {
			b[k] = v
		}
	}
	return b
}

func errMessage(out map[string]any) string {
	s, _ := out["error"].(string)
	return s
}

func TestPredictAnswers(t *testing.T) {
	g := newTestGateway(t, Config{})
	// The hosted service's own request shape, with null (missing) cells.
	req := `{"model": "` + testModel() + `", "task": "regression",
		"X_train": [[1, 2], [2, null], [3, 1], [4, 0], [5, 5]],
		"y_train": [1.5, 2.5, 3.5, 4.5, 5.5],
		"X_test": [[1.5, 2], [null, 3]]}`
	status, hdr, out := g.post(t, g.key, req)
	if status != 200 {
		t.Fatalf("status %d: %v", status, out)
	}
	if hdr.Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id")
	}
	preds, _ := out["predictions"].([]any)
	if len(preds) != 2 {
		t.Fatalf("predictions %v, want 2", out["predictions"])
	}
	for i, p := range preds {
		if _, ok := p.(float64); !ok {
			t.Errorf("prediction %d = %v, want a number", i, p)
		}
	}
	if out["model"] != testModel() || out["task"] != "regression" {
		t.Errorf("model=%v task=%v", out["model"], out["task"])
	}
	usage, _ := out["usage"].(map[string]any)
	want := map[string]float64{"context_rows": 5, "features": 2, "query_rows": 2,
		"input_tokens": 9 + 5 + 3, "output_tokens": 2, "total_tokens": 19}
	for k, v := range want {
		if usage[k] != v {
			t.Errorf("usage.%s=%v, want %v", k, usage[k], v)
		}
	}
	rep, _ := out["memory_report"].(map[string]any)
	if rep == nil {
		t.Fatal("no memory_report")
	}
	for _, k := range []string{"rung", "clamped", "notes"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("memory_report has no %q: %v", k, rep)
		}
	}
	if c, _ := rep["clamped"].([]any); c == nil || len(c) != 0 {
		t.Errorf("clamped=%v, want []", rep["clamped"])
	}
	if rep["rung"] != "no_cache" {
		t.Errorf("rung=%v for a one-pass query set, want no_cache", rep["rung"])
	}
	// Task absent means regression.
	if status, _, out := g.post(t, g.key, body(20, 3, map[string]any{"task": nil})); status != 200 {
		t.Fatalf("without task: %d %v", status, out)
	}
}

func TestPredictErrors(t *testing.T) {
	g := newTestGateway(t, Config{MaxBodyBytes: 64 << 10, RateBurst: 1000})
	revoked := g.newKey(t, "gone")
	if err := g.keys.Revoke(context.Background(), "gone"); err != nil {
		t.Fatal(err)
	}
	X, y, Xq := linearData(10, 2)
	big := body(3000, 10, nil) // about 100 kB
	tests := []struct {
		name   string
		key    string
		body   any
		status int
		want   string
	}{
		{"no key", "", body(10, 2, nil), 401, "missing API key"},
		{"basic scheme", "raw:Basic " + g.key, body(10, 2, nil), 401, `must read 'Bearer <key>' or 'Api-Key <key>', not "Basic"`},
		{"no scheme", "raw:" + g.key, body(10, 2, nil), 401, `must read 'Bearer <key>' or 'Api-Key <key>'`},
		{"malformed key", "sk-123", body(10, 2, nil), 403, "unknown API key"},
		{"unknown key", "rgd_0123456789abcdef_" + strings.Repeat("A", secretLen), body(10, 2, nil), 403, "unknown API key"},
		{"revoked key", revoked, body(10, 2, nil), 403, "revoked"},
		{"not JSON", g.key, `{"model": `, 400, "not valid JSON"},
		{"python NaN", g.key, `{"model": "m", "X_train": [[NaN]], "y_train": [1], "X_test": [[1]]}`, 400, "NaN"},
		{"python Infinity", g.key, `{"model": "m", "X_train": [[1]], "y_train": [Infinity], "X_test": [[1]]}`, 400, "Infinity"},
		{"array body", g.key, `[1, 2]`, 400, "JSON object"},
		{"null body", g.key, `null`, 400, "JSON object"},
		{"unknown field", g.key, body(10, 2, map[string]any{"x_train": X}), 400, `unknown field(s) "x_train" (did you mean "X_train"?)`},
		{"no model", g.key, body(10, 2, map[string]any{"model": nil}), 400, "model is required"},
		{"model not a string", g.key, body(10, 2, map[string]any{"model": 3}), 400, "model must be a string"},
		{"unknown model", g.key, body(10, 2, map[string]any{"model": "acme/model-9b"}), 404, `model "acme/model-9b" is not served here`},
		{"other task", g.key, body(10, 2, map[string]any{"task": "classification"}), 400, `task "classification" is not supported`},
		{"thinking model with policy", g.key, body(10, 2, map[string]any{"model": testModel() + "-thinking-medium", "memory_policy": "exact"}), 400, "thinking"},
		{"no X_train", g.key, body(10, 2, map[string]any{"X_train": nil}), 400, "X_train is required"},
		{"empty X_train", g.key, body(10, 2, map[string]any{"X_train": [][]float64{}, "y_train": []float64{}}), 400, "X_train is empty"},
		{"empty X_test", g.key, body(10, 2, map[string]any{"X_test": [][]float64{}}), 400, "X_test is empty"},
		{"X_train not rows", g.key, body(10, 2, map[string]any{"X_train": []float64{1, 2}}), 400, "X_train row 0 must be an array"},
		{"empty row", g.key, body(10, 2, map[string]any{"X_train": [][]float64{{}}, "y_train": []float64{1}}), 400, "X_train row 0 is empty"},
		{"ragged X_train", g.key, body(10, 2, map[string]any{"X_train": append(X[:9:9], []float64{1, 2, 3})}), 400, "X_train row 9 has 3 values but row 0 has 2"},
		{"ragged X_test", g.key, body(10, 2, map[string]any{"X_test": [][]float64{{1, 2}, {1}}}), 400, "X_test row 1 has 1 values but row 0 has 2"},
		{"y_train short", g.key, body(10, 2, map[string]any{"y_train": y[:9]}), 400, "y_train has 9 values but X_train has 10 rows"},
		{"y_train null", g.key, `{"model":"` + testModel() + `","X_train":[[1],[2]],"y_train":[1,null],"X_test":[[1]]}`, 400, "y_train[1] is null"},
		{"X_test width", g.key, body(10, 2, map[string]any{"X_test": [][]float64{{1, 2, 3}}}), 400, "X_test rows have 3 features but X_train rows have 2"},
		{"overflow", g.key, `{"model":"` + testModel() + `","X_train":[[1],[1e999]],"y_train":[1,2],"X_test":[[1]]}`, 400, "X_train row 1, column 0: 1e999 is not a finite number"},
		{"string cell", g.key, `{"model":"` + testModel() + `","X_train":[[1],["2"]],"y_train":[1,2],"X_test":[[1]]}`, 400, "X_train row 1, column 0: want a number or null, got a string"},
		{"bool target", g.key, `{"model":"` + testModel() + `","X_train":[[1],[2]],"y_train":[1,true],"X_test":[[1]]}`, 400, "y_train[1]: want a number or null, got a boolean"},
		{"bad policy", g.key, body(10, 2, map[string]any{"memory_policy": map[string]any{"cache": false, "cache_dtype": "int8", "speed": 1}}), 400,
			`invalid memory_policy: unknown field "speed"; cache=false with cache-only field(s) cache_dtype`},
		{"bad preset", g.key, body(10, 2, map[string]any{"memory_policy": "fastest"}), 400, `unknown preset "fastest"`},
		{"report passed back", g.key, body(10, 2, map[string]any{"memory_policy": map[string]any{"rung": "no_cache", "est_cache_gb": 0, "cache": true}}), 400,
			"a memory_report was passed back as memory_policy"},
		{"body too large", g.key, big, 413, "over this gateway's limit of 65536 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, hdr, out := g.post(t, tt.key, tt.body)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %v", status, tt.status, out)
			}
			msg := errMessage(out)
			if !strings.Contains(msg, tt.want) {
				t.Fatalf("error %q does not mention %q", msg, tt.want)
			}
			if strings.Contains(msg, g.key) {
				t.Fatalf("error %q echoes the key", msg)
			}
			if out["message"] != msg {
				t.Errorf("message %q differs from error %q", out["message"], msg)
			}
			if status == 401 && hdr.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
	_ = Xq

	t.Run("wrong method and path", func(t *testing.T) {
		res, err := http.Get(g.http.URL + "/predict")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 405 || res.Header.Get("Allow") != "POST" {
			t.Fatalf("GET /predict: %d Allow=%q", res.StatusCode, res.Header.Get("Allow"))
		}
		res, _ = http.Post(g.http.URL+"/nope", "application/json", strings.NewReader("{}"))
		res.Body.Close()
		if res.StatusCode != 404 || res.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("POST /nope: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
		}
	})
}

// findKey looks for key anywhere in a decoded JSON object (the resolved
// policy may sit flat in the report or under a sub-object).
func findKey(v any, key string) (any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	if x, ok := m[key]; ok {
		return x, true
	}
	for _, x := range m {
		if r, ok := findKey(x, key); ok {
			return r, true
		}
	}
	return nil, false
}

func TestPredictPresetsAndPolicies(t *testing.T) {
	g := newTestGateway(t, Config{})
	tests := []struct {
		name   string
		policy any
		field  string
		want   any
	}{
		{"exact", "exact", "allow_quantization", false},
		{"max_context", "max_context", "cache_dtype", "int8"},
		{"off", "off", "cache", false},
		{"object", map[string]any{"gpu_budget_frac": 0.2, "allow_subsample": false}, "gpu_budget_frac", 0.2},
		{"null is the default", nil, "cache_dtype", "bf16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := body(30, 5, nil)
			if tt.policy != nil {
				b["memory_policy"] = tt.policy
			} else {
				b["memory_policy"] = json.RawMessage("null")
			}
			status, _, out := g.post(t, g.key, b)
			if status != 200 {
				t.Fatalf("status %d: %v", status, out)
			}
			got, ok := findKey(out["memory_report"], tt.field)
			if !ok || got != tt.want {
				t.Fatalf("memory_report %s=%v (found %v), want %v: %v", tt.field, got, ok, tt.want, out["memory_report"])
			}
		})
	}
}

func TestPredictClampedAndNotes(t *testing.T) {
	g := newTestGateway(t, Config{HostMemoryBytes: 16 << 30, MaxHostBudgetBytes: 2 << 30, DeviceMemoryBytes: 8 << 30})
	status, _, out := g.post(t, g.key, body(30, 5, map[string]any{"memory_policy": map[string]any{
		"host_budget_absolute_gb": 6, "gpu_budget_frac": 0.3, "gpu_budget_absolute_gb": 1}}))
	if status != 200 {
		t.Fatalf("status %d: %v", status, out)
	}
	rep := out["memory_report"].(map[string]any)
	if c := fmt.Sprint(rep["clamped"]); c != "[host_budget_absolute_gb]" {
		t.Errorf("clamped=%s, want [host_budget_absolute_gb]", c)
	}
	if v, _ := findKey(rep, "host_budget_absolute_gb"); v != 2.0 {
		t.Errorf("resolved host_budget_absolute_gb=%v, want the cap 2", v)
	}
	notes := fmt.Sprint(rep["notes"])
	if !strings.Contains(notes, "gpu_budget_frac and gpu_budget_absolute_gb are both set") {
		t.Errorf("notes %s do not explain fraction+absolute", notes)
	}
	// The default share of a 16 GiB host is 4 GiB: over the 2 GiB cap too.
	_, _, out = g.post(t, g.key, body(30, 5, nil))
	if c := fmt.Sprint(out["memory_report"].(map[string]any)["clamped"]); c != "[host_budget_frac]" {
		t.Errorf("default policy on a small cap: clamped=%s, want [host_budget_frac]", c)
	}
	// offload off: nothing to clamp, and a note.
	_, _, out = g.post(t, g.key, body(30, 5, map[string]any{"memory_policy": map[string]any{"offload_to_host": false, "host_budget_absolute_gb": 100}}))
	rep = out["memory_report"].(map[string]any)
	if c := fmt.Sprint(rep["clamped"]); c != "[]" {
		t.Errorf("offload off: clamped=%s, want []", c)
	}
	if !strings.Contains(fmt.Sprint(rep["notes"]), "offload_to_host=false") {
		t.Errorf("offload off: notes=%v", rep["notes"])
	}
}

func TestPredictRateLimit(t *testing.T) {
	g := newTestGateway(t, Config{RatePerMinute: 2, RateBurst: 2})
	other := g.newKey(t, "other")
	b := body(10, 2, nil)
	for i := range 2 {
		if status, _, out := g.post(t, g.key, b); status != 200 {
			t.Fatalf("request %d: %d %v", i, status, out)
		}
	}
	status, hdr, out := g.post(t, g.key, b)
	if status != 429 {
		t.Fatalf("third request: %d %v, want 429", status, out)
	}
	ra, err := strconv.Atoi(hdr.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 30 {
		t.Fatalf("Retry-After=%q, want about 30 s at 2/min", hdr.Get("Retry-After"))
	}
	if !strings.Contains(errMessage(out), "rate limit") {
		t.Errorf("429 message %q", errMessage(out))
	}
	// Another key has its own bucket.
	if status, _, out := g.post(t, other, b); status != 200 {
		t.Fatalf("other key: %d %v", status, out)
	}
}

func TestPredictUsageMetered(t *testing.T) {
	g := newTestGateway(t, Config{})
	ctx := context.Background()
	for range 2 {
		if status, _, out := g.post(t, g.key, body(20, 3, nil)); status != 200 {
			t.Fatalf("%d %v", status, out)
		}
	}
	g.post(t, g.key, body(20, 3, map[string]any{"task": "classification"}))
	g.post(t, g.key, body(20, 3, map[string]any{"model": "acme/other"}))
	rows, err := g.keys.Usage(ctx, UsageQuery{Name: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	var ok, errs UsageRow
	for _, r := range rows {
		if r.Model == testModel() {
			ok = r
		}
		errs.Errors += r.Errors
		if r.Model == "acme/other" {
			t.Error("an unknown model slug was stored")
		}
	}
	if ok.Requests != 2 || ok.ContextRows != 40 || ok.QueryRows != 6 || ok.InputTokens != 2*(40+20+6) || ok.OutputTokens != 6 {
		t.Fatalf("metered %+v", ok)
	}
	if errs.Errors != 2 {
		t.Fatalf("errors metered %d, want 2 (rows %+v)", errs.Errors, rows)
	}
}

func TestPredictConcurrencyBounded(t *testing.T) {
	g := newTestGateway(t, Config{MaxConcurrent: 1, MaxQueue: 1, QueueTimeout: 5 * time.Second, RateBurst: 100})
	started, unblock := make(chan struct{}, 4), make(chan struct{})
	real := g.srv.predict
	g.srv.predict = func(ctx context.Context, req engineRequest) (*engineResult, error) {
		started <- struct{}{}
		<-unblock
		return real(ctx, req)
	}
	b := body(10, 2, nil)
	var wg sync.WaitGroup
	statuses := make(chan int, 2)
	for range 2 { // one runs, one queues
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, _, _ := g.post(t, g.key, b)
			statuses <- s
		}()
	}
	<-started
	// Wait until the second is queued, then a third is shed with 503.
	deadline := time.Now().Add(5 * time.Second)
	for g.srv.gate.waiting.Load() < 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	status, hdr, out := g.post(t, g.key, b)
	if status != 503 || hdr.Get("Retry-After") == "" || !strings.Contains(errMessage(out), "busy") {
		t.Fatalf("third request: %d Retry-After=%q %v, want 503 busy", status, hdr.Get("Retry-After"), out)
	}
	close(unblock)
	wg.Wait()
	close(statuses)
	for s := range statuses {
		if s != 200 {
			t.Errorf("queued request ended %d, want 200", s)
		}
	}
}

func TestPredictEnginePanicIs500(t *testing.T) {
	g := newTestGateway(t, Config{})
	g.srv.predict = func(context.Context, engineRequest) (*engineResult, error) { panic("boom") }
	status, _, out := g.post(t, g.key, body(10, 2, nil))
	if status != 500 || !strings.Contains(errMessage(out), "internal error") || strings.Contains(errMessage(out), "boom") {
		t.Fatalf("panic: %d %v", status, out)
	}
}

func TestFloatsMarshal(t *testing.T) {
	b, _ := json.Marshal(floats{1, math.NaN(), -2.5, math.Inf(1)})
	if string(b) != `[1,null,-2.5,null]` {
		t.Fatalf("got %s", b)
	}
}

func TestConfigValidate(t *testing.T) {
	c := Config{MaxBodyBytes: -1, RatePerMinute: -1, RateBurst: -1, MaxConcurrent: -1, MaxQueue: -1, DefaultModel: "nope/model"}
	c.setDefaults()
	err := c.Validate()
	if err == nil {
		t.Fatal("bad config validated")
	}
	for _, w := range []string{"max body bytes", "rate per minute", "rate burst", "max concurrent", "max queue", "default model"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q not reported in %v", w, err)
		}
	}
	var d Config
	d.setDefaults()
	if err := d.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	if d.MaxBodyBytes != 25_000_000 || d.RatePerMinute != 50 || d.DeviceMemoryBytes != gpu.DefaultDeviceMemoryBytes {
		t.Fatalf("defaults %+v", d)
	}
}

// A gzip body used to be read as JSON and refused as malformed, which sent
// its sender looking at the JSON: it is now a 415 naming the coding.
func TestPredictCompressedBodyIs415(t *testing.T) {
	g := newTestGateway(t, Config{})
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	if err := json.NewEncoder(zw).Encode(body(10, 2, nil)); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	req, _ := http.NewRequest(http.MethodPost, g.http.URL+"/predict", &zb)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set("Authorization", "Bearer "+g.key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(string(data), "Content-Encoding: gzip") {
		t.Fatalf("HTTP %d %s, want 415 naming the coding", res.StatusCode, data)
	}
}
