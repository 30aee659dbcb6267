package pipeline_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regressd/regressd/pipeline/pipelinetest"
	"github.com/regressd/regressd/schemas"
)

// flakyVendor stands in for a hosted gateway (a third party we cannot run):
// for the first `bad` after its first call it answers 500, 429 with
// Retry-After, or hangs past the client's timeout, in turn; then it is well.
type flakyVendor struct {
	*httptest.Server
	bad   time.Duration
	mu    sync.Mutex
	first time.Time
	calls []time.Time
	n     int
}

func newFlakyVendor(t *testing.T, bad time.Duration) *flakyVendor {
	v := &flakyVendor{bad: bad}
	v.Server = httptest.NewServer(http.HandlerFunc(v.serve))
	t.Cleanup(v.Close)
	return v
}

func (v *flakyVendor) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	v.mu.Lock()
	if v.first.IsZero() {
		v.first = now
	}
	v.calls = append(v.calls, now)
	v.n++
	n, bad := v.n, now.Sub(v.first) < v.bad
	v.mu.Unlock()
	if bad {
		switch n % 3 {
		case 0:
			w.WriteHeader(http.StatusInternalServerError)
			json.NewEncoder(w).Encode(map[string]string{"error": "injected"})
		case 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			json.NewEncoder(w).Encode(map[string]string{"error": "slow down"})
		default:
			select { // past the trigger's request_timeout of 1s
			case <-time.After(3 * time.Second):
			case <-r.Context().Done():
			}
		}
		return
	}
	pipelinetest.AnswerLikeVendor(w, r)
}

func (v *flakyVendor) callsBetween(from, to time.Time) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for _, c := range v.calls {
		if c.After(from) && c.Before(to) {
			n++
		}
	}
	return n
}

// breakerChanges reads the worker's breaker transitions from its log.
func breakerChanges(t *testing.T, logs string) (open, halfOpen []time.Time) {
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `msg="circuit breaker"`) {
			continue
		}
		ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			t.Fatalf("breaker log line without a time: %s", line)
		}
		switch {
		case strings.Contains(line, "to=open"):
			open = append(open, at)
		case strings.Contains(line, "to=half-open"):
			halfOpen = append(halfOpen, at)
		}
	}
	return open, halfOpen
}

// TestGatewayOutageOpensBreaker runs tasks against a hosted gateway that
// fails for a while: the breaker opens, the worker stops calling (and
// pulling) while it is open, and every task completes after the gateway
// recovers, with what a healthy gateway would have given.
func TestGatewayOutageOpensBreaker(t *testing.T) {
	t.Parallel() // mostly waiting on processes: overlap with the other fault tests
	load := defaultLoad("fg")
	load.hosts, load.windows = []string{"a", "b"}, 3
	const model, extra = "vendor/model-x", "request_timeout=1s,max_retries=1"
	healthy := newFlakyVendor(t, 0)
	ref := reference(t, load, model, extra, "--predictor", "remote", "--gateway-url", healthy.URL)

	flaky := newFlakyVendor(t, 8*time.Second)
	e := pipelinetest.Start(t, "--predictor", "remote", "--gateway-url", flaky.URL)
	load.setup(t, e.Pool, e.P.JS, model, extra)
	ctx := faultContext(t, 3*time.Minute)
	statuses := submit(t, ctx, func() string { return e.URL }, load.tasks(), 0)
	allSucceeded(t, statuses, len(load.tasks()))
	sameAsReference(t, e.Pool, load, ref)

	open, halfOpen := breakerChanges(t, e.Logs.String())
	if len(open) == 0 || len(halfOpen) == 0 {
		t.Fatalf("the breaker never opened and probed again (opened %d, half-open %d times)", len(open), len(halfOpen))
	}
	for i, o := range open {
		end := time.Now()
		for _, h := range halfOpen {
			if h.After(o) {
				end = h
				break
			}
		}
		// A prediction under way when the breaker opened may still make its
		// client's last retry: after at most the 1s timeout and a 2s backoff.
		if n := flaky.callsBetween(o.Add(3*time.Second), end.Add(-50*time.Millisecond)); n > 0 {
			t.Errorf("breaker open #%d (%v): %d gateway calls while open, want none", i+1, end.Sub(o).Round(time.Millisecond), n)
		}
	}
	if n := countDLQ(t, e); n != 0 {
		t.Errorf("%d messages dead-lettered during the outage", n)
	}
	t.Logf("breaker opened %d time(s); %d gateway calls in all", len(open), len(flaky.calls))
}

func countDLQ(t *testing.T, e *pipelinetest.Env) int {
	return len(e.DeadLetters(schemas.SubjectDLQ + ">"))
}
