package gateway

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// This file is the compatibility suite: requests built byte for byte as
// the vendor's official Python client builds them (its newest wire
// contract, ../shared/spec/reference-behaviour.md), sent to the real
// gateway (a real server, a real key in a real PostgreSQL, the built-in
// engine), and responses parsed and checked as that client parses and
// checks them. A failure here is a user of the official client who
// notices the switch.

// officialCall is one SynthefyNoriClient.predict call's arguments.
type officialCall struct {
	model      string
	scheme     string // Bearer (the client's default) or Api-Key
	X          [][]float64
	y          []float64
	Xq         [][]float64
	task       string // "" = the default, "regression"
	outputType string // "" = the default "mean", omitted from the body
	quantiles  []float64
	policy     any // a preset string or a map of only the fields set; nil: omitted
	// large-context fields; nil/zero: omitted
	largePolicy    any
	largeThreshold *int64
	largeSeed      *int64
}

// pyFloat writes a float as Python's json writes a float from a list of
// floats; NaN (a missing cell) goes as null, as the client sends it.
func pyFloat(b *bytes.Buffer, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		b.WriteString("null")
		return
	}
	s := strconv.FormatFloat(v, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0" // Python writes floats with a point: 1.0
	}
	b.WriteString(s)
}

// body is the JSON the client posts: the request model's fields in their
// declared order with None left out (X_train, y_train, X_test, task,
// output_type, quantiles, the large-context fields), then memory_policy
// (only the fields set), then model; compact separators.
func (c officialCall) body() []byte {
	var b bytes.Buffer
	field := func(name string) {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(name) + ":")
	}
	matrix := func(m [][]float64) {
		b.WriteByte('[')
		for i, row := range m {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('[')
			for j, v := range row {
				if j > 0 {
					b.WriteByte(',')
				}
				pyFloat(&b, v)
			}
			b.WriteByte(']')
		}
		b.WriteByte(']')
	}
	vector := func(v []float64) {
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			pyFloat(&b, x)
		}
		b.WriteByte(']')
	}
	raw := func(v any) {
		j, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		b.Write(j)
	}
	b.WriteByte('{')
	field("X_train")
	matrix(c.X)
	field("y_train")
	vector(c.y)
	field("X_test")
	matrix(c.Xq)
	field("task")
	raw(cmp(c.task, "regression"))
	if c.outputType != "" && c.outputType != OutputMean {
		field("output_type")
		raw(c.outputType)
	}
	if c.quantiles != nil {
		field("quantiles")
		vector(c.quantiles)
	}
	if c.largePolicy != nil {
		field("large_context_policy")
		raw(c.largePolicy)
	}
	if c.largeThreshold != nil {
		field("large_context_threshold")
		raw(*c.largeThreshold)
	}
	if c.largeSeed != nil {
		field("large_context_seed")
		raw(*c.largeSeed)
	}
	if c.policy != nil {
		field("memory_policy")
		raw(c.policy)
	}
	field("model")
	raw(c.model)
	b.WriteByte('}')
	return b.Bytes()
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// officialResponse is NoriPredictResponse: task and predictions required,
// predictions numbers only (a float list refuses null), the rest optional;
// unknown fields carried.
type officialResponse struct {
	Task         *string            `json:"task"`
	Predictions  []*float64         `json:"predictions"`
	MemoryReport map[string]any     `json:"memory_report"`
	OutputType   *string            `json:"output_type"`
	Quantiles    [][]*float64       `json:"quantiles"`
	Taus         []float64          `json:"taus"`
	Large        map[string]any     `json:"large_context_report"`
	Model        string             `json:"model"`
	Extra        map[string]any     `json:"-"`
	Usage        map[string]float64 `json:"usage"`
}

// officialError is what the client raises on a non-200 answer.
type officialError struct {
	status int
	msg    string
}

func (e *officialError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.msg) }

// predict posts c as the client does and checks the answer as it does:
// the memory-policy and output-type handshakes, the large-context report,
// and the quantile block's shape. It returns the parsed response.
func (c officialCall) predict(t *testing.T, g *testGateway, key string) (*officialResponse, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, g.http.URL+"/predict", bytes.NewReader(c.body()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", cmp(c.scheme, "Bearer")+" "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "synthefy-python httpx/0.28.1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		var e struct {
			Error, Detail, Message string
		}
		json.Unmarshal(data, &e)
		return nil, &officialError{res.StatusCode, e.Error + e.Detail + e.Message}
	}
	var out officialResponse
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("response not parseable by the client: %v: %.200s", err, data)
	}
	if out.Task == nil || out.Predictions == nil {
		return nil, fmt.Errorf("response lacks task or predictions: %.200s", data)
	}
	for i, p := range out.Predictions {
		if p == nil {
			return nil, fmt.Errorf("predictions[%d] is null: the client's float list refuses it", i)
		}
	}
	if len(out.Predictions) != len(c.Xq) {
		return nil, fmt.Errorf("%d predictions for %d query rows", len(out.Predictions), len(c.Xq))
	}
	if c.policy != nil && out.MemoryReport == nil {
		return nil, fmt.Errorf("memory_policy was sent but the response has no memory_report: the client raises")
	}
	if c.outputType != "" && c.outputType != OutputMean && (out.OutputType == nil || *out.OutputType != c.outputType) {
		return nil, fmt.Errorf("output_type %q asked, %v honoured: the client raises", c.outputType, out.OutputType)
	}
	if c.largePolicy != nil && out.Large == nil {
		return nil, fmt.Errorf("large_context_policy was sent but the response has no large_context_report")
	}
	if c.outputType == OutputQuantiles || c.outputType == OutputFull {
		k := len(c.quantiles)
		if c.outputType == OutputFull {
			k = len(out.Taus)
		}
		if len(out.Quantiles) != len(c.Xq) {
			return nil, fmt.Errorf("quantiles has %d rows for %d query rows", len(out.Quantiles), len(c.Xq))
		}
		for q, row := range out.Quantiles {
			if len(row) != k {
				return nil, fmt.Errorf("quantiles row %d has %d values, want %d: the client calls it malformed", q, len(row), k)
			}
		}
	}
	return &out, nil
}

// compatData is y = 3a − 2b + 1 on a grid, with missing cells.
func compatData(n, nq int, missing bool) ([][]float64, []float64, [][]float64) {
	var X, Xq [][]float64
	var y []float64
	for i := range n {
		a, b := float64(i%11)/5, float64(i%7)/3
		y = append(y, 3*a-2*b+1)
		if missing && i%9 == 4 {
			b = math.NaN()
		}
		X = append(X, []float64{a, b})
	}
	for i := range nq {
		row := []float64{float64(i%5) / 2, float64(i%3) / 2}
		if missing && i == 1 {
			row[0] = math.NaN()
		}
		Xq = append(Xq, row)
	}
	return X, y, Xq
}

func i64p(v int64) *int64 { return &v }

// TestOfficialClientCompat runs the official client's calls against the
// real gateway.
func TestOfficialClientCompat(t *testing.T) {
	g := newTestGateway(t, Config{RateBurst: 1000})
	X, y, Xq := compatData(60, 6, true)
	base := officialCall{model: "nori-6m", X: X, y: y, Xq: Xq}

	t.Run("default call, Bearer, short model name, null cells", func(t *testing.T) {
		out, err := base.predict(t, g, g.key)
		if err != nil {
			t.Fatal(err)
		}
		if *out.Task != "regression" || out.OutputType == nil || *out.OutputType != OutputMean || out.Model != "regressd/model-2l" {
			t.Fatalf("task %v output_type %v model %q", *out.Task, out.OutputType, out.Model)
		}
		for i, p := range out.Predictions {
			if math.IsNaN(*p) || math.IsInf(*p, 0) {
				t.Fatalf("prediction %d not finite", i)
			}
		}
		// Row 0 is (0, 0): y = 1 on the grid.
		if math.Abs(*out.Predictions[0]-1) > 0.3 {
			t.Fatalf("prediction at (0,0) = %v, want about 1", *out.Predictions[0])
		}
	})

	t.Run("schemes", func(t *testing.T) {
		for _, scheme := range []string{"Bearer", "Api-Key", "bearer", "BEARER", "api-key"} {
			c := base
			c.scheme = scheme
			if _, err := c.predict(t, g, g.key); err != nil {
				t.Errorf("scheme %q: %v", scheme, err)
			}
		}
		c := base
		c.scheme = "Token"
		if _, err := c.predict(t, g, g.key); err == nil || err.(*officialError).status != 401 {
			t.Errorf("scheme Token: %v, want 401", err)
		}
	})

	t.Run("model names", func(t *testing.T) {
		for name, want := range map[string]string{
			"synthefy/nori-6m": "regressd/model-2l", "synthefy/nori-30m": "regressd/model-4l", "nori-30m": "regressd/model-4l",
			"synthefy/nori-30m-thinking-medium": "regressd/model-4l-thinking", "nori-30m-thinking": "regressd/model-4l-thinking",
			"regressd/model-2l": "regressd/model-2l",
		} {
			c := base
			c.model = name
			c.X, c.y = X[:30], y[:30]
			out, err := c.predict(t, g, g.key)
			if err != nil || out.Model != want {
				t.Errorf("model %q: %v, served by %v, want %s", name, err, out, want)
			}
		}
		c := base
		c.model = "synthefy/nori-100m"
		if _, err := c.predict(t, g, g.key); err == nil || err.(*officialError).status != 404 {
			t.Errorf("unknown model: %v, want 404", err)
		}
	})

	t.Run("task spellings", func(t *testing.T) {
		for _, task := range []string{"regression", "Regression", "regressor", " REG "} {
			c := base
			c.task = task
			if _, err := c.predict(t, g, g.key); err != nil {
				t.Errorf("task %q: %v", task, err)
			}
		}
		c := base
		c.task = "classification"
		if _, err := c.predict(t, g, g.key); err == nil || !strings.Contains(err.Error(), "not supported") {
			t.Errorf("task classification: %v", err)
		}
	})

	t.Run("median", func(t *testing.T) {
		c := base
		c.outputType = OutputMedian
		out, err := c.predict(t, g, g.key)
		if err != nil {
			t.Fatal(err)
		}
		if out.Quantiles != nil || out.Taus != nil {
			t.Fatalf("median answered with quantiles %v taus %v", out.Quantiles, out.Taus)
		}
	})

	t.Run("quantiles in the caller's order", func(t *testing.T) {
		c := base
		c.outputType, c.quantiles = OutputQuantiles, []float64{0.9, 0.1, 0.5}
		out, err := c.predict(t, g, g.key)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(out.Taus, c.quantiles) {
			t.Fatalf("taus %v, want %v", out.Taus, c.quantiles)
		}
		for q, row := range out.Quantiles {
			hi, lo, mid := *row[0], *row[1], *row[2]
			if !(lo <= mid && mid <= hi) || hi-lo <= 0 {
				t.Fatalf("row %d: q10 %v q50 %v q90 %v not ordered", q, lo, mid, hi)
			}
		}
		// The client transposes to level-major: lo, mid, hi = predict(...).
		// Its rows are the query rows, so a level's column is complete.
		if len(out.Quantiles[0]) != 3 {
			t.Fatal("not three levels per row")
		}
	})

	t.Run("full bank", func(t *testing.T) {
		c := base
		c.outputType = OutputFull
		out, err := c.predict(t, g, g.key)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Taus) != 99 || out.Taus[0] != 0.01 || out.Taus[98] != 0.99 || !sort.Float64sAreSorted(out.Taus) {
			t.Fatalf("taus %v", out.Taus)
		}
		for q, row := range out.Quantiles {
			for k := 1; k < len(row); k++ {
				if *row[k] < *row[k-1] {
					t.Fatalf("row %d not ascending at %d", q, k)
				}
			}
		}
	})

	t.Run("bad levels named", func(t *testing.T) {
		for _, tt := range []struct {
			typ  string
			qs   []float64
			want string
		}{
			{OutputQuantiles, []float64{0.5, 1, 0, 1.5}, "1, 0, 1.5 not in (0, 1)"},
			{OutputQuantiles, nil, `requires quantiles`},
			{OutputMedian, []float64{0.5}, `only valid with output_type "quantiles"`},
			{"interval", nil, `output_type "interval" is not one of`},
			{OutputQuantiles, make100(), "100 levels, at most 99"},
		} {
			c := base
			c.outputType, c.quantiles = tt.typ, tt.qs
			_, err := c.predict(t, g, g.key)
			if err == nil || err.(*officialError).status != 400 || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s %v: %v, want 400 %q", tt.typ, tt.qs, err, tt.want)
			}
		}
	})

	t.Run("memory policy, 14 fields", func(t *testing.T) {
		c := base
		c.policy = map[string]any{"cache_dtype": "int8", "reuse_context_cache": true, "stream_context": false}
		out, err := c.predict(t, g, g.key)
		if err != nil {
			t.Fatal(err)
		}
		r := out.MemoryReport
		if r["cache_dtype"] != "int8" || r["reuse_context_cache"] != true || r["stream_context"] != false {
			t.Fatalf("report %v", r)
		}
		hist, _ := r["attempt_history"].([]any)
		if len(hist) != 1 {
			t.Fatalf("attempt_history %v", r["attempt_history"])
		}
		a := hist[0].(map[string]any)
		for _, k := range []string{"path", "rung", "cache_dtype", "offload_to_host", "context_row_chunk", "query_chunk", "outcome", "reason", "dropped_context_rows"} {
			if _, ok := a[k]; !ok {
				t.Errorf("attempt lacks %q: %v", k, a)
			}
		}
		if a["outcome"] != "success" || a["rung"] != r["rung"] {
			t.Errorf("attempt %v, report rung %v", a, r["rung"])
		}
		for _, p := range []any{"exact", "max_context", "off", map[string]any{"reuse_context_cache": false}} {
			c.policy = p
			if _, err := c.predict(t, g, g.key); err != nil {
				t.Errorf("policy %v: %v", p, err)
			}
		}
		c.policy = map[string]any{"stream_context": true}
		if out, err := c.predict(t, g, g.key); err != nil {
			t.Errorf("stream_context true: %v", err)
		} else if r := out.MemoryReport; r["stream_context"] != true || r["rung"] != "stream_bf16" {
			t.Errorf("stream_context true: report %v, want stream_context true and rung stream_bf16", r)
		}
		c.policy = map[string]any{"reuse_context_cache": "yes"}
		if _, err := c.predict(t, g, g.key); err == nil || !strings.Contains(err.Error(), "reuse_context_cache must be a boolean") {
			t.Errorf("reuse_context_cache string: %v", err)
		}
	})

	t.Run("large context policy", func(t *testing.T) {
		X, y, Xq := compatData(400, 8, false)
		c := officialCall{model: "nori-6m", X: X, y: y, Xq: Xq, largePolicy: "random", largeThreshold: i64p(100), largeSeed: i64p(7)}
		out, err := c.predict(t, g, g.key)
		if err != nil {
			t.Fatal(err)
		}
		r := out.Large
		for _, k := range []string{"applied", "policy", "threshold", "seed", "holdout_strategy", "reason", "window", "n_train", "n_test", "shards_available", "nori_calls", "full_context", "reused_train_state", "gate_winner"} {
			if _, ok := r[k]; !ok {
				t.Errorf("large_context_report lacks %q: %v", k, r)
			}
		}
		if r["applied"] != true || r["threshold"] != 100.0 || r["seed"] != 7.0 || r["n_train"] != 400.0 || r["n_test"] != 8.0 {
			t.Errorf("report %v", r)
		}
		// Below the threshold: not applied, and says why.
		c.largeThreshold = i64p(10_000)
		if out, err = c.predict(t, g, g.key); err != nil || out.Large["applied"] != false || out.Large["reason"] != "below_threshold" {
			t.Errorf("below threshold: %v %v", err, out)
		}
		// A list is a holdout gate among the policies (400 rows fit one
		// internal call's window, so the whole context serves).
		c.largePolicy, c.largeThreshold = []string{"random", "cluster_route"}, i64p(100)
		if out, err = c.predict(t, g, g.key); err != nil || out.Large["policy"] != "gate[random,cluster_route]" || out.Large["full_context"] != true {
			t.Errorf("gate: %v %v", err, out)
		}
		// Threshold without a policy is an error, as the client has it.
		c.largePolicy = nil
		if _, err := c.predict(t, g, g.key); err == nil || !strings.Contains(err.Error(), "without large_context_policy") {
			t.Errorf("threshold alone: %v", err)
		}
		c.largePolicy, c.largeThreshold = "nonsense", nil
		if _, err := c.predict(t, g, g.key); err == nil || err.(*officialError).status != 400 {
			t.Errorf("unknown policy: %v", err)
		}
		c.largePolicy, c.model = "random", "nori-30m-thinking"
		if _, err := c.predict(t, g, g.key); err == nil || !strings.Contains(err.Error(), "thinking") {
			t.Errorf("thinking with a policy: %v", err)
		}
	})
}

func make100() []float64 {
	out := make([]float64, 100)
	for i := range out {
		out[i] = 0.005 + float64(i)/101
	}
	return out
}

// tensorfile builds the client's binary request as its save_request writes
// it: the magic and header length, the JSON header with sorted keys and
// compact separators, zero padding to 64 KiB, then X_train (<f4), y_train
// (<f8) and X_test (<f4) back to back.
func (c officialCall) tensorfile() []byte {
	var arrays bytes.Buffer
	type spec struct {
		DType  string `json:"dtype"`
		NBytes int    `json:"nbytes"`
		Offset int    `json:"offset"`
		Shape  []int  `json:"shape"`
	}
	tensors := map[string]spec{}
	f4 := func(name string, m [][]float64) {
		start := arrays.Len()
		for _, row := range m {
			for _, v := range row {
				binary.Write(&arrays, binary.LittleEndian, float32(v))
			}
		}
		tensors[name] = spec{"<f4", arrays.Len() - start, tensorfileHeaderBytes + start, []int{len(m), len(m[0])}}
	}
	f4("X_train", c.X)
	start := arrays.Len()
	for _, v := range c.y {
		binary.Write(&arrays, binary.LittleEndian, v)
	}
	tensors["y_train"] = spec{"<f8", arrays.Len() - start, tensorfileHeaderBytes + start, []int{len(c.y)}}
	f4("X_test", c.Xq)
	meta := map[string]any{"model": c.model, "task": cmp(c.task, "regression")}
	if c.outputType != "" && c.outputType != OutputMean {
		meta["output_type"] = c.outputType
	}
	if c.quantiles != nil {
		meta["quantiles"] = c.quantiles
	}
	if c.policy != nil {
		meta["memory_policy"] = c.policy
	}
	// encoding/json sorts map keys, as sort_keys=True does; Python does
	// not escape < and >.
	var hb bytes.Buffer
	enc := json.NewEncoder(&hb)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]any{"format": "synthefy-nori-request-v1", "metadata": meta, "tensors": tensors}); err != nil {
		panic(err)
	}
	header := bytes.TrimSpace(hb.Bytes())
	var out bytes.Buffer
	out.WriteString("NORI_REQ")
	binary.Write(&out, binary.LittleEndian, uint32(len(header)))
	out.Write(header)
	out.Write(make([]byte, tensorfileHeaderBytes-12-len(header)))
	out.Write(arrays.Bytes())
	return out.Bytes()
}

// TestOfficialClientTensorfile: the binary request answers as the JSON one
// does (up to float32 inputs), and a malformed one is a 400 naming why.
func TestOfficialClientTensorfile(t *testing.T) {
	g := newTestGateway(t, Config{RateBurst: 1000})
	X, y, Xq := compatData(60, 6, true)
	c := officialCall{model: "synthefy/nori-6m", X: X, y: y, Xq: Xq, outputType: OutputQuantiles, quantiles: []float64{0.1, 0.9}, policy: map[string]any{"cache_dtype": "int8"}}
	post := func(body []byte) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, g.http.URL+"/predict", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+g.key)
		req.Header.Set("Content-Type", TensorfileContentType)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		json.NewDecoder(res.Body).Decode(&out)
		return res.StatusCode, out
	}
	status, bin := post(c.tensorfile())
	if status != 200 {
		t.Fatalf("tensorfile: %d %v", status, bin)
	}
	// The same call as JSON, with the inputs rounded to float32 as the
	// tensorfile carries them.
	c32 := c
	c32.X, c32.Xq = to32(X), to32(Xq)
	js, err := c32.predict(t, g, g.key)
	if err != nil {
		t.Fatal(err)
	}
	preds := bin["predictions"].([]any)
	qs := bin["quantiles"].([]any)
	if len(preds) != len(Xq) || len(qs) != len(Xq) || bin["output_type"] != OutputQuantiles || bin["model"] != "regressd/model-2l" {
		t.Fatalf("tensorfile answer %v", bin)
	}
	if rep, _ := bin["memory_report"].(map[string]any); rep["cache_dtype"] != "int8" {
		t.Fatalf("memory report %v", bin["memory_report"])
	}
	for i, p := range preds {
		if d := math.Abs(p.(float64) - *js.Predictions[i]); d > 1e-9 {
			t.Errorf("row %d: tensorfile %v, JSON %v", i, p, *js.Predictions[i])
		}
	}

	good := c.tensorfile()
	bad := func(edit func([]byte) []byte) []byte { return edit(slices.Clone(good)) }
	for _, tt := range []struct {
		name string
		body []byte
		want string
	}{
		{"magic", bad(func(b []byte) []byte { copy(b, "NORI_RES"); return b }), `does not start with "NORI_REQ"`},
		{"short header", good[:1000], "ends inside its 65536-byte header"},
		{"short arrays", good[:len(good)-8], "ends inside or before tensor X_test"},
		{"trailing", append(slices.Clone(good), 0), "bytes after its last tensor"},
		{"dtype", bad(func(b []byte) []byte { return bytes.Replace(b, []byte(`"<f8"`), []byte(`"<f4"`), 1) }), `y_train has dtype "<f4", want "<f8"`},
		{"format", bad(func(b []byte) []byte { return bytes.Replace(b, []byte(`request-v1`), []byte(`request-v9`), 1) }), `tensorfile format "synthefy-nori-request-v9"`},
		{"metadata", bad(func(b []byte) []byte { return bytes.Replace(b, []byte(`"task"`), []byte(`"tusk"`), 1) }), `unknown metadata field(s) "tusk"`},
	} {
		status, out := post(tt.body)
		msg, _ := out["error"].(string)
		if status != 400 || !strings.Contains(msg, tt.want) {
			t.Errorf("%s: %d %q, want 400 %q", tt.name, status, msg, tt.want)
		}
	}
	// A tensorfile sent as JSON (or with no type) is named as such, 415.
	for _, ct := range []string{"application/json", "application/octet-stream", ""} {
		req, _ := http.NewRequest(http.MethodPost, g.http.URL+"/predict", bytes.NewReader(good))
		req.Header.Set("Authorization", "Bearer "+g.key)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		json.NewDecoder(res.Body).Decode(&out)
		res.Body.Close()
		if msg, _ := out["error"].(string); res.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(msg, "Content-Type: "+TensorfileContentType) {
			t.Errorf("tensorfile as %q: %d %q, want 415 naming the tensorfile content type", ct, res.StatusCode, msg)
		}
	}
}

func to32(m [][]float64) [][]float64 {
	out := make([][]float64, len(m))
	for i, row := range m {
		out[i] = make([]float64, len(row))
		for j, v := range row {
			out[i][j] = float64(float32(v))
		}
	}
	return out
}
