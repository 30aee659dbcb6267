package gpu

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// streamFit fits model-4l (every head kind: solve, smoothing, local, top-k)
// on n rows with GP experts of solveChunk rows (0: the model's).
func streamFit(t *testing.T, n, solveChunk int) *contextFit {
	t.Helper()
	X, y := synth(n, 4, 21)
	cfg, _ := lookupConfig("regressd/model-4l")
	c, err := fitContext(context.Background(), cfg, X, y, fitOptions{solveChunk: solveChunk})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// onFit is a model-4l regressor on an existing fit.
func onFit(t *testing.T, c *contextFit, policy string, opts ...Option) *Regressor {
	t.Helper()
	r, err := NewRegressor("regressd/model-4l", append([]Option{WithQueryBatch(64), WithPolicy(policyJSON(t, policy))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	r.fit = c
	return r
}

// TestStreamMatchesResident: a streamed context of ten slices of
// context_row_chunk rows (70 rounds down to 64; the last slice and the last
// anchor block partial) predicts the same bits as the resident cache at
// the same precision, and reports its rung and one resolved attempt.
func TestStreamMatchesResident(t *testing.T) {
	c := streamFit(t, 600, 0)
	Xq, _ := synth(200, 4, 22)
	for _, tc := range []struct {
		name, resident, stream, rung string
		host                         int64
	}{
		{"bf16", `{}`, `{"stream_context": true, "context_row_chunk": 64}`, RungStreamBF16, 1 << 30},
		{"int8", `"max_context"`, `{"stream_context": true, "context_row_chunk": 64, "cache_dtype": "int8"}`, RungStreamInt8, 1 << 30},
		// A host budget between the int8 and the bf16 cache sizes.
		{"host budget picks int8", `"max_context"`, `{"stream_context": true, "context_row_chunk": 64, "host_budget_absolute_gb": %s}`, RungStreamInt8, 1 << 30},
		{"host RAM unknown", `{}`, `{"stream_context": true, "context_row_chunk": 70}`, RungStreamBF16, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := onFit(t, c, tc.resident)
			want := mustPredict(t, res, Xq)
			if rung := res.MemoryReport().Rung; rung != "resident_"+tc.rung[len("stream_"):] {
				t.Fatalf("reference rung %s", rung)
			}
			between := (res.estBytes(CacheDTypeInt8) + res.estBytes(CacheDTypeBF16)) / 2
			st := onFit(t, c, strings.Replace(tc.stream, "%s", fmt.Sprintf("%.9f", float64(between)/gibF), 1), WithHostMemory(tc.host))
			got := mustPredict(t, st, Xq)
			sameBits(t, tc.name, want, got)
			rep := st.MemoryReport()
			if rep.Rung != tc.rung || rep.ResidentGB != 0 || rep.CacheBytes != st.estBytes(st.cache.dtype) {
				t.Errorf("rung %s resident_gb %g cache_bytes %d, want %s, 0, %d", rep.Rung, rep.ResidentGB, rep.CacheBytes, tc.rung, st.estBytes(st.cache.dtype))
			}
			if len(rep.Attempts) != 1 {
				t.Fatalf("attempts %+v, want one", rep.Attempts)
			}
			a := rep.Attempts[0]
			if a.Rung != tc.rung || a.Tier != "host" || a.ContextRowChunk != 64 || a.Outcome != OutcomeSuccess || a.Reason != ReasonResolved || a.QueryChunk != 64 {
				t.Errorf("attempt %+v", a)
			}
			// A second call reuses the host cache.
			sameBits(t, tc.name+" again", want[:10], mustPredict(t, st, Xq[:10]))
			if st.dev.Used() != 0 {
				t.Errorf("device holds %d bytes after predict: a streamed cache holds none", st.dev.Used())
			}
		})
	}
}

// TestStreamSmallDevice: on a device too small for a layer of the cache,
// the exact policy's ladder (no int8) cannot hold the context at all, even
// in the plain loop; stream_context runs in slices, halving its first slice
// after an out-of-memory error, with the same bits as the resident rung
// and a peak reservation a fraction of one layer.
func TestStreamSmallDevice(t *testing.T) {
	c := streamFit(t, 600, 64) // experts of 64 rows: a small solve workspace
	Xq, _ := synth(100, 4, 23)
	want := mustPredict(t, onFit(t, c, `{}`), Xq)
	layer := int64(c.n) * bytesPerRowLayer(c.g, CacheDTypeBF16)
	const capacity = 96 << 10
	if layer <= capacity {
		t.Fatalf("a bf16 layer (%d bytes) must outgrow the device (%d)", layer, capacity)
	}

	dev := NewCPUDevice(capacity)
	exact := onFit(t, c, `{"allow_quantization": false}`, WithDevice(dev), WithHostMemory(1<<30))
	if _, err := exact.Predict(context.Background(), Xq); !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("exact policy on %d bytes: err = %v, want out of memory", capacity, err)
	}

	dev = NewCPUDevice(capacity)
	st := onFit(t, c, `{"allow_quantization": false, "stream_context": true, "gpu_budget_frac": 1}`, WithDevice(dev), WithHostMemory(1<<30))
	got := mustPredict(t, st, Xq)
	sameBits(t, "stream on a small device", want, got)
	rep := st.MemoryReport()
	if rep.Rung != RungStreamBF16 {
		t.Fatalf("rung %s", rep.Rung)
	}
	// The first slice is as many whole blocks as the budget (the whole
	// device) holds; with one query row's scores beside it, it does not
	// fit, and half of it does.
	bpr := bytesPerRowLayer(c.g, CacheDTypeBF16)
	first := capacity / bpr / anchorBlock * anchorBlock
	if first*(bpr+headsPerLayer*4) <= capacity || first >= int64(c.n) {
		t.Fatalf("first slice %d rows should fit the budget but not the device beside a query's scores, and be less than the context", first)
	}
	line := fmt.Sprintf("[stream_bf16/host/%d oom resolved stream_bf16/host/%d success oom_retry]", first, first/2/anchorBlock*anchorBlock)
	if got, want := fmt.Sprint(attemptLine(rep.Attempts)), line; got != want {
		t.Errorf("attempts %s, want %s", got, want)
	}
	slice := st.cache.slice
	stage := int64(slice)*bytesPerRowLayer(c.g, CacheDTypeBF16) + int64(rep.QueryChunk)*int64(slice)*headsPerLayer*4
	solve := int64(64*64*8 + 64*(c.f+4)*8)
	if peak := dev.Peak(); peak > max(stage, solve) || peak >= layer {
		t.Errorf("peak reservation %d bytes, want at most max(slice %d, solve %d) and below one layer (%d)", peak, stage, solve, layer)
	}
}

// TestStreamNeverPlainLoop: when not even one slice of one anchor block
// fits, stream_context fails with ErrOutOfMemory rather than run the
// plain loop.
func TestStreamNeverPlainLoop(t *testing.T) {
	c := streamFit(t, 200, 64)
	Xq, _ := synth(10, 4, 24)
	st := onFit(t, c, `{"stream_context": true}`, WithDevice(NewCPUDevice(4<<10)))
	_, err := st.Predict(context.Background(), Xq)
	if !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("err = %v, want out of memory", err)
	}
	st = onFit(t, c, `{"stream_context": true, "host_budget_absolute_gb": 0}`, WithHostMemory(1<<30))
	if _, err := st.Predict(context.Background(), Xq); !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("host budget 0: err = %v, want out of memory", err)
	}
}

// attemptLine renders attempts as rung/tier/chunk outcome reason.
func attemptLine(as []Attempt) []string {
	var out []string
	for _, a := range as {
		out = append(out, fmt.Sprintf("%s/%s/%d %s %s", a.Rung, a.Tier, a.ContextRowChunk, a.Outcome, a.Reason))
	}
	return out
}

// TestStreamPolicy: stream_context is a boolean and a cache rung: true
// with cache=false is refused, false is not.
func TestStreamPolicy(t *testing.T) {
	p := policyJSON(t, `{"stream_context": true}`)
	if !p.StreamContext || !p.IsSet("stream_context") {
		t.Errorf("stream_context true: %+v", p)
	}
	policyJSON(t, `{"cache": false, "stream_context": false}`)
	for raw, want := range map[string]string{
		`{"cache": false, "stream_context": true}`: "cache-only field(s) stream_context",
		`{"stream_context": "yes"}`:                "stream_context: want true or false",
	} {
		if _, err := ParsePolicy([]byte(raw)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", raw, err, want)
		}
	}
}
