package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
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

// FuzzDecodeBody checks the streaming scanner against encoding/json: a
// body it accepts is valid JSON, with the same numbers, and it never
// panics.
//
//	go test ./gateway -run '^$' -fuzz FuzzDecodeBody -fuzztime 1m
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{
		`{"X_train": [[1, 2], [3, null]], "y_train": [1, 2], "X_test": [[-0.5e-3, 1E+2]]}`,
		`{"X_train":[[1]],"y_train":[1],"X_test":[[1]],"model":"m","memory_policy":{"cache":true},"quantiles":[0.5]}`,
		`{"X_train": [[01]], "y_train": [1], "X_test": [[1]]}`,
		`{"X_train": [[1.]], "y_train": [-], "X_test": [[+1]]}`,
		`{"X_train": [[1,]], "y_train": [1,], "X_test": [[1]],}`,
		`{"model": "a\"b\\", "X_train": [[1]], "y_train": [1], "X_test": [[1]]} x`,
		`{"X_train" [[1]]}`, `{,}`, `{}`, ` {"X_train": [[1]], "y_train": [1], "X_test": [[1]]} `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeBody(bytes.NewReader(body), noBudget{})
		if err != nil {
			var br *badRequest
			if !errors.As(err, &br) {
				t.Fatalf("not a caller error: %v", err)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		var ref struct {
			X [][]*float64 `json:"X_train"`
		}
		if err := json.Unmarshal(body, &ref); err != nil {
			return // e.g. duplicate-key subtleties: encoding/json keeps the last
		}
		for i, row := range ref.X {
			for j, v := range row {
				got := req.X[i][j]
				if (v == nil) != math.IsNaN(got) || v != nil && *v != got {
					t.Fatalf("X_train[%d][%d] = %v, encoding/json reads %v", i, j, got, v)
				}
			}
		}
	})
}
