package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingReader is a request body that reports how much the server read.
type countingReader struct {
	r    io.Reader
	read atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// TestGateBeforeDecode: while every prediction slot is taken, a queued
// request's body is not read (beyond the transport's buffers), so waiting
// requests hold no matrices.
func TestGateBeforeDecode(t *testing.T) {
	g := newTestGateway(t, Config{MaxConcurrent: 1, MaxQueue: 2, QueueTimeout: 10 * time.Second, RateBurst: 100})
	started, unblock := make(chan struct{}, 4), make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(unblock) }) }
	defer release()
	real := g.srv.predict
	g.srv.predict = func(ctx context.Context, req engineRequest) (*engineResult, error) {
		started <- struct{}{}
		<-unblock
		return real(ctx, req)
	}
	done := make(chan int, 2)
	go func() { s, _, _ := g.post(t, g.key, body(10, 2, nil)); done <- s }()
	<-started

	// A large body, refused only once decoded (its task), so the test
	// does not wait for a fit.
	big := officialCall{model: testModel(), task: "classification"}
	big.X, big.y, big.Xq = compatData(20000, 2, false)
	payload := big.body()
	cr := &countingReader{r: bytes.NewReader(payload)}
	go func() {
		req, _ := http.NewRequest(http.MethodPost, g.http.URL+"/predict", cr)
		req.Header.Set("Authorization", "Bearer "+g.key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- 0
			return
		}
		res.Body.Close()
		done <- res.StatusCode
	}()
	deadline := time.Now().Add(5 * time.Second)
	for g.srv.gate.waiting.Load() < 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if g.srv.gate.waiting.Load() != 1 {
		t.Fatal("the second request never queued")
	}
	time.Sleep(200 * time.Millisecond)
	// Decoding reserves cells row by row: while queued, the key holds only
	// the running request's 34 cells, none of the queued one's 60,000.
	// (The transport may have copied the body into socket buffers.)
	g.srv.keyCells.mu.Lock()
	var held int64
	for _, n := range g.srv.keyCells.m {
		held += n
	}
	g.srv.keyCells.mu.Unlock()
	if held != 34 {
		t.Errorf("while queued the key holds %d cells, want 34 (the running request's)", held)
	}
	t.Logf("while queued: %d of %d body bytes in transit", cr.read.Load(), len(payload))
	release()
	want := []int{200, 400}
	var got []int
	for range 2 {
		got = append(got, <-done)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("statuses %v, want %v", got, want)
	}
}

// TestPredictCaps: rows, columns and cells per request, and cells in flight
// per key, are refused as the body streams, and counted.
func TestPredictCaps(t *testing.T) {
	g := newTestGateway(t, Config{MaxRows: 50, MaxColumns: 3, MaxCells: 150, MaxKeyCells: 160, RateBurst: 100})
	tests := []struct {
		name   string
		body   map[string]any
		status int
		want   string
	}{
		{"rows", body(51, 2, nil), 413, "X_train has over 50 rows"},
		{"query rows", body(10, 51, nil), 413, "X_test has over 50 rows"},
		{"columns", body(10, 2, map[string]any{"X_train": [][]float64{{1, 2, 3, 4}}, "y_train": []float64{1}}), 413, "X_train has 4 columns, over this gateway's limit of 3"},
		{"cells", body(40, 40, nil), 413, "over 150 cells"},
		{"within", body(30, 20, nil), 200, ""},
	}
	for _, tt := range tests {
		status, _, out := g.post(t, g.key, tt.body)
		if status != tt.status || !strings.Contains(errMessage(out), tt.want) {
			t.Errorf("%s: %d %v, want %d %q", tt.name, status, out, tt.status, tt.want)
		}
	}
	if n := g.srv.Refusals()["too_many_cells"]; n != 4 {
		t.Errorf("too_many_cells counted %d, want 4", n)
	}

	// Per key: one request holding 130 cells leaves 30 for the key.
	started, unblock := make(chan struct{}, 4), make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(unblock) }) }
	defer release()
	real := g.srv.predict
	g.srv.predict = func(ctx context.Context, req engineRequest) (*engineResult, error) {
		started <- struct{}{}
		<-unblock
		return real(ctx, req)
	}
	done := make(chan int, 1)
	go func() { s, _, _ := g.post(t, g.key, body(30, 20, nil)); done <- s }() // 60+30+40 = 130 cells
	<-started
	status, hdr, out := g.post(t, g.key, body(10, 2, nil)) // 34 cells: 130+34 > 160
	if status != 429 || hdr.Get("Retry-After") == "" || !strings.Contains(errMessage(out), "this key's requests in flight hold over 160 cells") {
		t.Errorf("second request of the key: %d %v, want 429", status, out)
	}
	other := g.newKey(t, "other")
	g.srv.predict = real
	if status, _, out := g.post(t, other, body(10, 2, nil)); status != 200 {
		t.Errorf("another key: %d %v, want 200", status, out)
	}
	release()
	if s := <-done; s != 200 {
		t.Errorf("first request %d", s)
	}
	if n := g.srv.Refusals()["key_cells"]; n != 1 {
		t.Errorf("key_cells counted %d, want 1", n)
	}
	// Released: the key may send again.
	if status, _, out := g.post(t, g.key, body(10, 2, nil)); status != 200 {
		t.Errorf("after release: %d %v", status, out)
	}
}

// TestDepartedClientStopsTheEngine: when the caller goes away mid
// prediction, the real engine sees its context end and stops, and the
// request is counted as abandoned.
func TestDepartedClientStopsTheEngine(t *testing.T) {
	g := newTestGateway(t, Config{RateBurst: 100})
	type outcome struct {
		err error
		at  time.Time
	}
	began, ended := make(chan time.Time, 1), make(chan outcome, 1)
	real := g.srv.predict
	g.srv.predict = func(ctx context.Context, req engineRequest) (*engineResult, error) {
		began <- time.Now()
		res, err := real(ctx, req)
		ended <- outcome{err, time.Now()}
		return res, err
	}
	// A context big enough to keep the thinking model busy for seconds.
	c := officialCall{model: "regressd/model-4l-thinking"}
	c.X, c.y, c.Xq = compatData(3000, 2000, false)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.http.URL+"/predict", bytes.NewReader(c.body()))
	req.Header.Set("Authorization", "Bearer "+g.key)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
	}()
	start := <-began
	time.Sleep(300 * time.Millisecond)
	left := time.Now()
	cancel()
	var o outcome
	select {
	case o = <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the engine kept working 30 s after the caller left")
	}
	wg.Wait()
	if !errors.Is(o.err, context.Canceled) {
		t.Fatalf("engine ended with %v after %v, want context.Canceled", o.err, o.at.Sub(start))
	}
	stop := o.at.Sub(left)
	t.Logf("engine stopped %v after the caller left (it had run %v)", stop, left.Sub(start))
	if stop > 5*time.Second {
		t.Errorf("engine took %v to stop", stop)
	}
	deadline := time.Now().Add(5 * time.Second)
	for g.srv.Refusals()["abandoned"] != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := g.srv.Refusals()["abandoned"]; n != 1 {
		t.Errorf("abandoned counted %d, want 1", n)
	}
}

// TestTensorfileCapsBeforeArrays: a tensorfile whose header claims more
// cells than the cap is refused from its header alone, before any array
// byte is read (here none are even sent).
func TestTensorfileCapsBeforeArrays(t *testing.T) {
	g := newTestGateway(t, Config{MaxCells: 1000, RateBurst: 100})
	X, y, Xq := compatData(600, 2, false) // 1,200 + 600 + 4 cells
	tf := officialCall{model: "nori-6m", X: X, y: y, Xq: Xq}.tensorfile()
	req, _ := http.NewRequest(http.MethodPost, g.http.URL+"/predict", bytes.NewReader(tf[:tensorfileHeaderBytes]))
	req.Header.Set("Authorization", "Bearer "+g.key)
	req.Header.Set("Content-Type", TensorfileContentType+"; charset=binary")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 413 {
		t.Fatalf("status %d, want 413 from the header's shapes", res.StatusCode)
	}
	if n := g.srv.Refusals()["too_many_cells"]; n != 1 {
		t.Errorf("too_many_cells counted %d, want 1", n)
	}
}
