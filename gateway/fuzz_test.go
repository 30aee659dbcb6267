package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/regressd/regressd/tsdb/pgtest"
)

// FuzzPredictBody sends fuzzed bodies to POST /predict on a real server (real
// keys in a real database, the built-in engine): bad input is answered with
// a 4xx and a JSON error, never a 5xx, never a crash.
//
//	go test ./gateway -run '^$' -fuzz FuzzPredictBody -fuzztime 1m
func FuzzPredictBody(f *testing.F) {
	model := testModel()
	valid := func(extra string) string {
		return `{"model": "` + model + `", "X_train": [[1, 2], [2, 3], [3, 5], [4, 4]], "y_train": [1, 2, 3, 4], "X_test": [[5, 6]]` + extra + `}`
	}
	for _, s := range []string{
		valid(""),
		valid(`, "task": "regression"`),
		valid(`, "task": "classification"`),
		valid(`, "memory_policy": {"kv_cache": "auto"}`),
		valid(`, "memory_policy": "lots"`),
		valid(`, "unknown": 1`),
		`{"model": "` + model + `", "X_train": [[1, null], [2, "NaN"]], "y_train": [1, 2], "X_test": [[1e308, -1e308]]}`,
		`{"model": "` + model + `", "X_train": [[1]], "y_train": [1, 2], "X_test": [[1]]}`,
		`{"model": "` + model + `", "X_train": [], "y_train": [], "X_test": []}`,
		`{"model": "` + model + `", "X_train": [[1, 2], [3]], "y_train": [1, 2], "X_test": [[1, 2]]}`,
		`{"model": "` + model + `", "X_train": [[1, 2], [1, 2]], "y_train": [5, 5], "X_test": [[1, 2]]}`,
		`{"model": "nope/none", "X_train": [[1]], "y_train": [1], "X_test": [[1]]}`,
		`{"model": "x-thinking-medium", "memory_policy": {}, "X_train": [[1]], "y_train": [1], "X_test": [[1]]}`,
		`{"model": 7}`,
		valid(`, "output_type": "quantiles", "quantiles": [0.9, 0.1]`),
		valid(`, "output_type": "full"`),
		valid(`, "output_type": "median", "quantiles": [2]`),
		valid(`, "memory_policy": {"reuse_context_cache": false, "stream_context": true}`),
		valid(`, "large_context_policy": ["random", "cluster_route"], "large_context_threshold": 2, "large_context_seed": 4294967296`),
		valid(`, "model": "dup"`),
		`{"model": "nori-6m", "X_train": [[1, 2], [2, null]], "y_train": [1, 2], "X_test": [[null, null]]}`,
		`{`, `[]`, `null`, ``, `"text"`,
		`{"X_train": ` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`,
		`{"model": "\u0000\ud800", "X_train": [[1e999]], "y_train": [1], "X_test": [[1]]}`,
	} {
		f.Add([]byte(s))
	}
	srv, err := NewServer(Config{RatePerMinute: 1e9, RateBurst: 1 << 30, HostMemoryBytes: 16 << 30}, pgtest.New(f), nil)
	if err != nil {
		f.Fatal(err)
	}
	key, _, err := srv.keys.Create(context.Background(), "fuzzer")
	if err != nil {
		f.Fatal(err)
	}
	h := srv.Handler()
	post := func(body []byte) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/predict", bytes.NewReader(body))
		req.Header.Set("Authorization", "Api-Key "+key)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	// The fuzzer must reach the engine, not only the refusals.
	if rec := post([]byte(valid(""))); rec.Code != http.StatusOK {
		f.Fatalf("a valid body: HTTP %d %s", rec.Code, rec.Body)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := post(body)
		if rec.Code >= 500 {
			t.Fatalf("HTTP %d for body %q: %s", rec.Code, body, rec.Body)
		}
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("HTTP %d answered with something not JSON: %q", rec.Code, rec.Body)
		}
		if rec.Code != http.StatusOK && out["error"] == nil {
			t.Fatalf("HTTP %d without an error message: %s", rec.Code, rec.Body)
		}
	})
}
