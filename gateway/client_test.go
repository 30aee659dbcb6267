package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/regressd/regressd/gpu"
)

// fakeClock records the waits between attempts and advances time by them,
// so retry tests take no real time.
type fakeClock struct {
	mu    sync.Mutex
	t     time.Time
	waits []time.Duration
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *fakeClock) sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	c.t = c.t.Add(d)
	return nil
}

func (c *fakeClock) recorded() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

// reply is one scripted answer of the fake vendor gateway.
type reply struct {
	status  int
	body    string
	header  map[string]string
	delay   time.Duration // before answering
	hangup  bool          // close the connection without an answer
	checkFn func(t *testing.T, r *http.Request, body []byte)
}

// vendorGateway replays the hosted service's response shapes and failure
// modes: a scripted reply per call, the last one repeating.
type vendorGateway struct {
	t       *testing.T
	mu      sync.Mutex
	script  []reply
	calls   int
	srv     *httptest.Server
	lastReq []byte
}

func newVendorGateway(t *testing.T, script ...reply) *vendorGateway {
	v := &vendorGateway{t: t, script: script}
	v.srv = httptest.NewServer(http.HandlerFunc(v.serve))
	t.Cleanup(v.srv.Close)
	return v
}

func (v *vendorGateway) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	v.mu.Lock()
	rep := v.script[min(v.calls, len(v.script)-1)]
	v.calls++
	v.lastReq = body
	v.mu.Unlock()
	if rep.checkFn != nil {
		rep.checkFn(v.t, r, body)
	}
	if rep.delay > 0 {
		select {
		case <-time.After(rep.delay):
		case <-r.Context().Done():
			return
		}
	}
	if rep.hangup {
		hj, _ := w.(http.Hijacker)
		conn, _, _ := hj.Hijack()
		conn.Close()
		return
	}
	for k, val := range rep.header {
		w.Header().Set(k, val)
	}
	if strings.HasPrefix(strings.TrimSpace(rep.body), "{") {
		w.Header().Set("Content-Type", "application/json")
	} else {
		w.Header().Set("Content-Type", "text/html")
	}
	w.WriteHeader(rep.status)
	io.WriteString(w, rep.body)
}

func (v *vendorGateway) callCount() int { v.mu.Lock(); defer v.mu.Unlock(); return v.calls }

// vendorOK is the hosted service's 200 shape (no model, tokens only).
func vendorOK(preds string) reply {
	return reply{status: 200, body: `{"task": "regression", "predictions": ` + preds +
		`, "usage": {"input_tokens": 9, "output_tokens": 2, "total_tokens": 11}}`}
}

const coldStartHTML = "<html><head><title>503 Service Temporarily Unavailable</title></head><body>model is starting</body></html>"

func newTestClient(t *testing.T, url string, clock *fakeClock, opts ...ClientOption) *Client {
	t.Helper()
	opts = append([]ClientOption{WithClock(clock.now, clock.sleep), WithJitter(func() time.Duration { return 250 * time.Millisecond })}, opts...)
	c, err := NewClient(url, "rgd_test_key", "synthefy/nori-6m", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var (
	cX  = [][]float64{{1, 2}, {2, math.NaN()}, {3, 1}}
	cY  = []float64{1, 2, 3}
	cXq = [][]float64{{1.5, 2}, {math.NaN(), 3}}
)

func TestClientWireFormat(t *testing.T) {
	v := newVendorGateway(t, reply{status: 200, body: `{"predictions": [1.25, null], "usage": {"input_tokens": 11}}`,
		checkFn: func(t *testing.T, r *http.Request, body []byte) {
			if got := r.Header.Get("Authorization"); got != "Api-Key rgd_test_key" {
				t.Errorf("Authorization=%q", got)
			}
			if r.URL.Path != "/predict" || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
				t.Errorf("%s %s %s", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
			}
			want := `{"model":"synthefy/nori-6m","task":"regression","X_train":[[1,2],[2,null],[3,1]],"y_train":[1,2,3],"X_test":[[1.5,2],[null,3]]}`
			if string(body) != want {
				t.Errorf("body\n got %s\nwant %s", body, want)
			}
		}})
	c := newTestClient(t, v.srv.URL, newFakeClock())
	ans, err := c.Predict(context.Background(), cX, cY, cXq, nil)
	if err != nil {
		t.Fatal(err)
	}
	if preds := ans.Predictions; preds[0] != 1.25 || !math.IsNaN(preds[1]) {
		t.Fatalf("preds=%v, want [1.25 NaN]", preds)
	}
	if ans.MemoryReport != nil {
		t.Error("a report appeared from nowhere")
	}
	if u := ans.Usage; u == nil || u.InputTokens != 11 {
		t.Errorf("usage %+v", u)
	}
}

func TestClientRetries(t *testing.T) {
	s := time.Second
	j := 250 * time.Millisecond
	tests := []struct {
		name      string
		script    []reply
		opts      []ClientOption
		ok        bool
		calls     int
		waits     []time.Duration
		wantErr   string
		transient bool
		status    int
	}{
		{name: "cold start is waited out without using retries",
			script: []reply{{status: 503, body: coldStartHTML}, {status: 503, body: coldStartHTML}, {status: 502, body: "Bad Gateway"},
				{status: 504, body: ""}, vendorOK("[1, 2]")},
			opts: []ClientOption{WithMaxRetries(0)}, ok: true, calls: 5, waits: []time.Duration{s + j, 2*s + j, 4*s + j, 8*s + j}},
		{name: "cold start honours Retry-After",
			script: []reply{{status: 503, body: coldStartHTML, header: map[string]string{"Retry-After": "20"}}, vendorOK("[1, 2]")},
			ok:     true, calls: 2, waits: []time.Duration{20 * s}},
		{name: "JSON 503 saying loading is a cold start",
			script: []reply{{status: 503, body: `{"error": "Model is loading", "estimated_time": 40}`}, vendorOK("[1, 2]")},
			opts:   []ClientOption{WithMaxRetries(0)}, ok: true, calls: 2, waits: []time.Duration{s + j}},
		{name: "cold start that never ends gives up",
			script: []reply{{status: 503, body: coldStartHTML}},
			opts:   []ClientOption{WithColdStartWait(time.Minute)}, calls: 7,
			waits:   []time.Duration{s + j, 2*s + j, 4*s + j, 8*s + j, 16*s + j, time.Minute - 31*s - 5*j},
			wantErr: "did not start within 1m0s", transient: true, status: 503},
		{name: "429 with Retry-After",
			script: []reply{{status: 429, body: `{"error": "rate limit exceeded"}`, header: map[string]string{"Retry-After": "7"}}, vendorOK("[1, 2]")},
			ok:     true, calls: 2, waits: []time.Duration{7 * s}},
		{name: "Retry-After capped at 30 s",
			script: []reply{{status: 429, body: `{"error": "slow down"}`, header: map[string]string{"Retry-After": "120"}}, vendorOK("[1, 2]")},
			ok:     true, calls: 2, waits: []time.Duration{30 * s}},
		{name: "Retry-After as a date",
			script: []reply{{status: 503, body: `{"error": "busy"}`, header: map[string]string{"Retry-After": "Wed, 01 Jan 2025 00:00:12 GMT"}}, vendorOK("[1, 2]")},
			ok:     true, calls: 2, waits: []time.Duration{12 * s}},
		{name: "5xx storm gives up after max retries",
			script: []reply{{status: 500, body: `{"detail": "internal server error"}`}},
			calls:  4, waits: []time.Duration{s + j, 2*s + j, 4*s + j},
			wantErr: "gave up after 4 attempts: gateway: HTTP 500: internal server error", transient: true, status: 500},
		{name: "408 409 425 are retried",
			script: []reply{{status: 408, body: `{}`}, {status: 409, body: `{}`}, {status: 425, body: `{}`}, vendorOK("[1, 2]")},
			ok:     true, calls: 4, waits: []time.Duration{s + j, 2*s + j, 4*s + j}},
		{name: "400 is not retried",
			script: []reply{{status: 400, body: `{"error": "X_test width 3 != X_train width 2"}`}},
			calls:  1, wantErr: "HTTP 400: X_test width 3 != X_train width 2", status: 400},
		{name: "401 is not retried",
			script: []reply{{status: 401, body: `{"message": "bad key"}`}},
			calls:  1, wantErr: "wants 'Authorization: Api-Key <key>'", status: 401},
		{name: "403 is not retried",
			script: []reply{{status: 403, body: `{"detail": "Forbidden"}`}},
			calls:  1, wantErr: "HTTP 403 (the API key was refused", status: 403},
		{name: "404 is not retried",
			script: []reply{{status: 404, body: `{"detail": "model not granted"}`}},
			calls:  1, wantErr: "model not granted", status: 404},
		{name: "connection dropped is retried",
			script: []reply{{hangup: true}, {hangup: true}, vendorOK("[1, 2]")},
			ok:     true, calls: 3, waits: []time.Duration{s + j, 2*s + j}},
		{name: "a timeout is not retried",
			script: []reply{{delay: 2 * time.Second, status: 200, body: `{"predictions": [1, 2]}`}},
			opts:   []ClientOption{WithRequestTimeout(50 * time.Millisecond)},
			calls:  1, wantErr: "no answer within the request timeout", transient: true},
		{name: "wrong prediction count",
			script: []reply{vendorOK("[1]")},
			calls:  1, wantErr: "1 predictions for 2 query rows", transient: true},
		{name: "non-number prediction",
			script: []reply{vendorOK(`[1, "x"]`)},
			calls:  1, wantErr: "prediction 1 is a string", transient: true},
		{name: "200 that is not JSON",
			script: []reply{{status: 200, body: "<html>ok</html>"}},
			calls:  1, wantErr: "unusable response", transient: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newVendorGateway(t, tt.script...)
			clock := newFakeClock()
			c := newTestClient(t, v.srv.URL, clock, tt.opts...)
			ans, err := c.Predict(context.Background(), cX, cY, cXq, nil)
			if got := v.callCount(); got != tt.calls {
				t.Errorf("calls=%d, want %d", got, tt.calls)
			}
			if got := clock.recorded(); !equalDurations(got, tt.waits) {
				t.Errorf("waits=%v, want %v", got, tt.waits)
			}
			if tt.ok {
				if err != nil || len(ans.Predictions) != 2 {
					t.Fatalf("Predict=%v, %v; want 2 predictions", ans, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Predict succeeded, want error %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not mention %q", err, tt.wantErr)
			}
			if got := IsTransient(err); got != tt.transient {
				t.Errorf("IsTransient=%v, want %v (%v)", got, tt.transient, err)
			}
			var he *HTTPError
			if tt.status != 0 && (!errors.As(err, &he) || he.Status != tt.status) {
				t.Errorf("error %v is not an *HTTPError with status %d", err, tt.status)
			}
		})
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestClientConnectionRefused(t *testing.T) {
	ts := httptest.NewServer(http.NotFoundHandler())
	url := ts.URL
	ts.Close() // nothing listens there now
	clock := newFakeClock()
	c := newTestClient(t, url, clock, WithMaxRetries(2))
	_, err := c.Predict(context.Background(), cX, cY, cXq, nil)
	if err == nil || !strings.Contains(err.Error(), "gave up after 3 attempts") || !strings.Contains(err.Error(), "connection failed") {
		t.Fatalf("err=%v", err)
	}
	if !IsTransient(err) || len(clock.recorded()) != 2 {
		t.Fatalf("transient=%v waits=%v", IsTransient(err), clock.recorded())
	}
}

func TestClientRespectsCallerDeadline(t *testing.T) {
	v := newVendorGateway(t, reply{status: 429, body: `{"error": "later"}`, header: map[string]string{"Retry-After": "20"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	dl, _ := ctx.Deadline()
	// The caller has 10 s left; the gateway asks for 20.
	clock := newFakeClock()
	c := newTestClient(t, v.srv.URL, clock, WithClock(func() time.Time { return dl.Add(-10 * time.Second) }, clock.sleep))
	_, err := c.Predict(ctx, cX, cY, cXq, nil)
	if err == nil || !strings.Contains(err.Error(), "no time left") || v.callCount() != 1 || len(clock.recorded()) != 0 {
		t.Fatalf("err=%v calls=%d waits=%v; want a give-up without waiting", err, v.callCount(), clock.recorded())
	}
	// A cancelled caller is not a gateway failure.
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	_, err = c.Predict(cctx, cX, cY, cXq, nil)
	if err == nil || IsTransient(err) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: err=%v transient=%v", err, IsTransient(err))
	}
}

func TestClientPolicyNeedsReport(t *testing.T) {
	// An old server answers but ignores memory_policy.
	v := newVendorGateway(t, vendorOK("[1, 2]"))
	c := newTestClient(t, v.srv.URL, newFakeClock())
	p, _ := gpu.PresetPolicy(gpu.PresetExact)
	_, err := c.Predict(context.Background(), cX, cY, cXq, &p)
	if !errors.Is(err, ErrNoMemoryReport) || IsTransient(err) {
		t.Fatalf("err=%v, want ErrNoMemoryReport (not transient)", err)
	}
	if !strings.Contains(string(v.lastReq), `"memory_policy":{"allow_quantization":false}`) {
		t.Fatalf("policy not sent as its set fields: %s", v.lastReq)
	}
	_, err = c.PredictRaw(context.Background(), cX, cY, cXq, json.RawMessage(`"max_context"`))
	if !errors.Is(err, ErrNoMemoryReport) || !strings.Contains(string(v.lastReq), `"memory_policy":"max_context"`) {
		t.Fatalf("raw preset: err=%v body=%s", err, v.lastReq)
	}
	// Without a policy the same answer is fine.
	if _, err := c.Predict(context.Background(), cX, cY, cXq, nil); err != nil {
		t.Fatal(err)
	}
}

func TestNewClientURL(t *testing.T) {
	tests := []struct {
		url, want, err string
	}{
		{url: "https://gw.example.com", want: "https://gw.example.com/predict"},
		{url: "https://gw.example.com/v1/", want: "https://gw.example.com/v1/predict"},
		{url: "https://gw.example.com/predict", want: "https://gw.example.com/predict"},
		{url: "http://127.0.0.1:8080", want: "http://127.0.0.1:8080/predict"},
		{url: "http://localhost:8080", want: "http://localhost:8080/predict"},
		{url: "http://[::1]:8080", want: "http://[::1]:8080/predict"},
		{url: "http://gw.example.com", err: "must be https"},
		{url: "http://10.0.0.5:8080", err: "must be https"},
		{url: "ftp://gw.example.com", err: "scheme must be https"},
		{url: "https://user:pw@gw.example.com", err: "credentials in the URL"},
		{url: "", err: "want https://host"},
		{url: "gw.example.com", err: "want https://host"},
	}
	for _, tt := range tests {
		c, err := NewClient(tt.url, "k", "m")
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("NewClient(%q) err=%v, want %q", tt.url, err, tt.err)
			}
			continue
		}
		if err != nil || c.endpoint != tt.want {
			t.Errorf("NewClient(%q)=%v, %v; want %s", tt.url, c, err, tt.want)
		}
	}
	if _, err := NewClient("https://x", "", "m"); err == nil {
		t.Error("empty key accepted")
	}
	if _, err := NewClient("https://x", "a\nb", "m"); err == nil {
		t.Error("key with a newline accepted")
	}
	if _, err := NewClient("https://x", "k", ""); err == nil {
		t.Error("empty model accepted")
	}
	if _, err := NewClient("https://x", "k", "m", WithMaxRetries(-1)); err == nil {
		t.Error("negative retries accepted")
	}
}

func TestClientAgainstOurServer(t *testing.T) {
	g := newTestGateway(t, Config{RateBurst: 100})
	c, err := NewClient(g.http.URL, g.key, testModel())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	X, y, Xq := linearData(40, 5)
	Xq[2][1] = math.NaN()
	ans, err := c.Predict(ctx, X, y, Xq, nil)
	if err != nil || len(ans.Predictions) != 5 {
		t.Fatalf("Predict=%v, %v", ans, err)
	}
	rep := ans.MemoryReport
	if rep == nil || rep.Rung == "" || rep.Clamped == nil {
		t.Fatalf("report %+v: our server always reports, with clamped", rep)
	}
	p := gpu.DefaultPolicy()
	p.GPUBudgetFrac = 0.3
	abs := 1.0
	p.GPUBudgetAbsoluteGB = &abs
	ans, err = c.Predict(ctx, X, y, Xq, &p)
	if err != nil {
		t.Fatal(err)
	}
	if rep := ans.MemoryReport; rep == nil || len(rep.Notes) == 0 {
		t.Fatalf("notes missing: %+v", rep)
	}
	// Caller errors come back as *HTTPError, not retried.
	_, err = c.PredictRaw(ctx, X, y, Xq, json.RawMessage(`{"cache": false, "cache_dtype": "int8"}`))
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != 400 || !strings.Contains(he.Message, "cache-only") || IsTransient(err) {
		t.Fatalf("bad policy: %v", err)
	}
	other, _ := NewClient(g.http.URL, g.key, "acme/unknown")
	if _, err := other.Predict(ctx, X, y, Xq, nil); !errors.As(err, &he) || he.Status != 404 {
		t.Fatalf("unknown model: %v", err)
	}
	bad, _ := NewClient(g.http.URL, "rgd_nope", testModel())
	if _, err := bad.Predict(ctx, X, y, Xq, nil); !errors.As(err, &he) || he.Status != 403 {
		t.Fatalf("bad key: %v", err)
	}
}

// TestClientBehindBreaker shows how a worker uses IsTransient with
// gobreaker: a 5xx storm opens the breaker, caller errors do not, and it
// closes again once the gateway answers.
func TestClientBehindBreaker(t *testing.T) {
	v := newVendorGateway(t, reply{status: 500, body: `{"error": "down"}`})
	c := newTestClient(t, v.srv.URL, newFakeClock(), WithMaxRetries(0))
	// Long enough that the checks right after the trip see it open on a
	// loaded machine (1 ms was not), short enough for a test.
	const openFor = 300 * time.Millisecond
	cb := gobreaker.NewCircuitBreaker[*Answer](gobreaker.Settings{
		Name:         "gateway",
		Timeout:      openFor,
		ReadyToTrip:  func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 3 },
		IsSuccessful: func(err error) bool { return err == nil || !IsTransient(err) },
	})
	call := func() error {
		_, err := cb.Execute(func() (*Answer, error) { return c.Predict(context.Background(), cX, cY, cXq, nil) })
		return err
	}
	for range 3 {
		call()
	}
	tripped := time.Now()
	if cb.State() != gobreaker.StateOpen {
		t.Fatalf("state %v after three 500s, want open", cb.State())
	}
	if err := call(); !errors.Is(err, gobreaker.ErrOpenState) {
		t.Fatalf("open breaker let a call through: %v", err)
	}
	calls := v.callCount()
	// The gateway recovers; after the breaker's timeout a probe closes it.
	v.mu.Lock()
	v.script = []reply{vendorOK("[1, 2]")}
	v.mu.Unlock()
	time.Sleep(openFor - time.Since(tripped) + 20*time.Millisecond)
	if err := call(); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if cb.State() != gobreaker.StateClosed || v.callCount() != calls+1 {
		t.Fatalf("state %v after a good probe, want closed", cb.State())
	}
	// 400s are the caller's: they never open the breaker.
	v.mu.Lock()
	v.script = []reply{{status: 400, body: `{"error": "bad"}`}}
	v.mu.Unlock()
	for range 5 {
		call()
	}
	if cb.State() != gobreaker.StateClosed {
		t.Fatalf("400s opened the breaker")
	}
}
