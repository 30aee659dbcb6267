package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/regressd/regressd/gpu"
)

// Client defaults.
const (
	// DefaultMaxRetries is how many times a failed call is retried (so at
	// most 4 attempts), as the hosted service's plugin does.
	DefaultMaxRetries = 3
	// DefaultRequestTimeout bounds one attempt (the seed's request_timeout).
	DefaultRequestTimeout = 300 * time.Second
	// DefaultColdStartWait is how long the client keeps waiting for a model
	// scaled to zero to start (the hosted service documents one to four
	// minutes).
	DefaultColdStartWait = 5 * time.Minute
	// MaxRetryWait caps each wait between attempts, Retry-After included.
	MaxRetryWait = 30 * time.Second
)

// maxResponseBytes bounds what the client reads of one answer.
const maxResponseBytes = 256 << 20

// Client calls POST /predict on a gateway: ours, or the hosted service the
// seed describes. It is safe for concurrent use.
//
// Retries: connection failures and 408, 409, 425, 429 and 5xx answers are
// retried up to MaxRetries times, waiting 2^(n−1) s plus up to 1 s of jitter
// before retry n, or the answer's Retry-After when it gives one, each wait
// capped at 30 s. 400, 401, 403, 404 and other 4xx answers are returned at
// once, as is a timeout of one attempt (the gateway may still be computing;
// the caller decides). A 502/503/504 whose body is not JSON is a model scaled
// to zero that is starting: the client waits it out for up to the cold-start
// wait (default 5 min) with the same backoff, and those waits do not use up
// MaxRetries. No wait outlives the caller's context deadline.
type Client struct {
	endpoint       string
	apiKey         string
	model          string
	http           *http.Client
	maxRetries     int
	requestTimeout time.Duration
	coldStartWait  time.Duration
	sleep          func(context.Context, time.Duration) error
	now            func() time.Time
	jitter         func() time.Duration
	log            *slog.Logger
}

// ClientOption configures a Client; it reports an invalid setting.
type ClientOption func(*Client) error

// WithHTTPClient sets the HTTP client (transport, proxies, TLS roots).
// Default: a client with no overall timeout (WithRequestTimeout bounds
// each attempt).
func WithHTTPClient(h *http.Client) ClientOption {
	return func(c *Client) error {
		if h == nil {
			return errors.New("nil HTTP client")
		}
		c.http = h
		return nil
	}
}

// WithMaxRetries sets how many times a transient failure is retried.
// Default 3; 0 disables retries (cold-start waits still apply).
func WithMaxRetries(n int) ClientOption {
	return func(c *Client) error {
		if n < 0 {
			return fmt.Errorf("max retries %d: must not be negative", n)
		}
		c.maxRetries = n
		return nil
	}
}

// WithRequestTimeout bounds one attempt, from sending to the last byte of
// the answer. Default 300 s.
func WithRequestTimeout(d time.Duration) ClientOption {
	return func(c *Client) error {
		if d <= 0 {
			return fmt.Errorf("request timeout %v: must be positive", d)
		}
		c.requestTimeout = d
		return nil
	}
}

// WithColdStartWait sets how long the client waits for a starting model
// (502/503/504 with a non-JSON body) before giving up. Default 5 min; 0
// treats a cold start like any 5xx.
func WithColdStartWait(d time.Duration) ClientOption {
	return func(c *Client) error {
		if d < 0 {
			return fmt.Errorf("cold-start wait %v: must not be negative", d)
		}
		c.coldStartWait = d
		return nil
	}
}

// WithClock replaces the clock and the sleep between attempts, so tests of
// retries run instantly. sleep must return ctx's error if ctx ends first.
func WithClock(now func() time.Time, sleep func(ctx context.Context, d time.Duration) error) ClientOption {
	return func(c *Client) error {
		if now == nil || sleep == nil {
			return errors.New("WithClock needs both now and sleep")
		}
		c.now, c.sleep = now, sleep
		return nil
	}
}

// WithJitter replaces the random jitter added to backoff waits (default
// uniform in [0, 1 s)).
func WithJitter(f func() time.Duration) ClientOption {
	return func(c *Client) error {
		if f == nil {
			return errors.New("nil jitter function")
		}
		c.jitter = f
		return nil
	}
}

// WithLogger logs retries and waits (never the key). Default: no logging.
func WithLogger(l *slog.Logger) ClientOption {
	return func(c *Client) error {
		if l == nil {
			return errors.New("nil logger")
		}
		c.log = l
		return nil
	}
}

// NewClient returns a client for the gateway at baseURL ("https://host" or
// "https://host/prefix"; "/predict" is appended unless present), sending
// apiKey as "Authorization: Api-Key <key>" and asking for model. The URL
// must be https, except on loopback (localhost, 127.0.0.0/8, ::1), so the
// key never crosses a network in clear.
func NewClient(baseURL, apiKey, model string, opts ...ClientOption) (*Client, error) {
	endpoint, err := predictEndpoint(baseURL)
	if err != nil {
		return nil, err
	}
	if apiKey == "" {
		return nil, errors.New("gateway client: an API key is required")
	}
	if strings.ContainsAny(apiKey, " \t\r\n") {
		return nil, errors.New("gateway client: the API key contains whitespace")
	}
	if model == "" {
		return nil, errors.New("gateway client: a model slug is required")
	}
	c := &Client{
		endpoint:       endpoint,
		apiKey:         apiKey,
		model:          model,
		http:           &http.Client{},
		maxRetries:     DefaultMaxRetries,
		requestTimeout: DefaultRequestTimeout,
		coldStartWait:  DefaultColdStartWait,
		sleep:          sleepCtx,
		now:            time.Now,
		jitter:         func() time.Duration { return rand.N(time.Second) },
		log:            slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, fmt.Errorf("gateway client: %w", err)
		}
	}
	return c, nil
}

func predictEndpoint(baseURL string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("gateway URL %q: want https://host[:port][/prefix]", baseURL)
	}
	if u.User != nil {
		return "", fmt.Errorf("gateway URL %q: credentials in the URL are not allowed; the API key goes in its own setting", u.Redacted())
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !IsLoopbackHost(u.Hostname()) {
			return "", fmt.Errorf("gateway URL %q: must be https (plain http is allowed only on loopback), or the API key would cross the network in clear", baseURL)
		}
	default:
		return "", fmt.Errorf("gateway URL %q: scheme must be https", baseURL)
	}
	u.RawQuery, u.Fragment = "", ""
	u.Path = strings.TrimSuffix(u.Path, "/")
	if !strings.HasSuffix(u.Path, "/predict") {
		u.Path += "/predict"
	}
	return u.String(), nil
}

// IsLoopbackHost reports whether host (a name or an address, no port) is
// the loopback interface.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Model is the model slug the client asks for.
func (c *Client) Model() string { return c.model }

// MemoryReport is the hosted memory report: the engine's figures, the
// resolved policy, and the server's clamped and notes.
type MemoryReport struct {
	Rung               string   `json:"rung"`
	EstCacheGB         float64  `json:"est_cache_gb"`
	ResidentGB         float64  `json:"resident_gb"`
	QueryChunk         int      `json:"query_chunk"`
	DroppedContextRows int      `json:"dropped_context_rows"`
	Clamped            []string `json:"clamped"`
	Notes              []string `json:"notes"`
	// Raw is the report object as the gateway sent it, resolved policy
	// included.
	Raw json.RawMessage `json:"-"`
}

// Answer is what one /predict call answered.
type Answer struct {
	// Predictions are one per query row; NaN where the gateway sent null.
	Predictions []float64
	// Usage is the metered usage, when the gateway sent it.
	Usage *Usage
	// MemoryReport is the engine's memory report, when the gateway sent
	// one (always when a memory policy was sent).
	MemoryReport *MemoryReport
}

// Predict sends context rows X with targets y and query rows Xq, and returns
// one prediction per query row; NaN cells go as null (missing), and a null
// prediction comes back as NaN. policy, when not nil, is sent as
// memory_policy (only its set fields; see gpu.Policy.WireJSON), and then the
// answer must carry a memory report (ErrNoMemoryReport otherwise).
func (c *Client) Predict(ctx context.Context, X [][]float64, y []float64, Xq [][]float64, policy *gpu.Policy) (*Answer, error) {
	var raw json.RawMessage
	if policy != nil {
		b, err := policy.WireJSON()
		if err != nil {
			return nil, fmt.Errorf("gateway: encode memory_policy: %w", err)
		}
		raw = b
	}
	return c.PredictRaw(ctx, X, y, Xq, raw)
}

// PredictRaw is Predict with memory_policy given as JSON: a preset string
// such as json.RawMessage(`"exact"`), an object, or nil for none.
func (c *Client) PredictRaw(ctx context.Context, X [][]float64, y []float64, Xq [][]float64, policy json.RawMessage) (*Answer, error) {
	if len(X) == 0 || len(Xq) == 0 {
		return nil, errors.New("gateway: X and Xq must each have at least one row")
	}
	if len(y) != len(X) {
		return nil, fmt.Errorf("gateway: %d targets for %d context rows", len(y), len(X))
	}
	if policy != nil && (len(bytes.TrimSpace(policy)) == 0 || isNull(policy)) {
		policy = nil
	}
	if policy != nil && !json.Valid(policy) {
		return nil, errors.New("gateway: memory_policy is not valid JSON")
	}
	body := encodeRequest(c.model, X, y, Xq, policy)
	resp, err := c.call(ctx, body)
	if err != nil {
		return nil, err
	}
	preds, err := decodePredictions(resp.Predictions, len(Xq))
	if err != nil {
		return nil, err
	}
	var report *MemoryReport
	if len(resp.MemoryReport) > 0 && !isNull(resp.MemoryReport) {
		report = &MemoryReport{}
		if err := json.Unmarshal(resp.MemoryReport, report); err != nil {
			return nil, fmt.Errorf("%w: memory_report: %v", ErrBadResponse, err)
		}
		report.Raw = resp.MemoryReport
	}
	if policy != nil && report == nil {
		return nil, ErrNoMemoryReport
	}
	return &Answer{Predictions: preds, Usage: resp.Usage, MemoryReport: report}, nil
}

// wireResponse is the 200 body of /predict.
type wireResponse struct {
	Predictions  []json.RawMessage `json:"predictions"`
	Usage        *Usage            `json:"usage"`
	MemoryReport json.RawMessage   `json:"memory_report"`
	// The distribution and large-context answers (client_detailed.go).
	OutputType         *string         `json:"output_type"`
	Quantiles          [][]*float64    `json:"quantiles"`
	Taus               []float64       `json:"taus"`
	LargeContextReport json.RawMessage `json:"large_context_report"`
}

func decodePredictions(raw []json.RawMessage, want int) ([]float64, error) {
	if len(raw) != want {
		return nil, fmt.Errorf("%w: %d predictions for %d query rows", ErrBadResponse, len(raw), want)
	}
	out := make([]float64, len(raw))
	for i, r := range raw {
		if isNull(r) {
			out[i] = math.NaN()
			continue
		}
		if err := json.Unmarshal(r, &out[i]); err != nil {
			return nil, fmt.Errorf("%w: prediction %d is %s, not a number", ErrBadResponse, i, gpu.JSONKind(r))
		}
	}
	return out, nil
}

// encodeRequest writes the body once; retries resend the same bytes.
func encodeRequest(model string, X [][]float64, y []float64, Xq [][]float64, policy json.RawMessage) []byte {
	cells := len(y)
	if len(X) > 0 {
		cells += len(X) * (len(X[0]) + 1)
	}
	if len(Xq) > 0 {
		cells += len(Xq) * (len(Xq[0]) + 1)
	}
	b := make([]byte, 0, 64+len(policy)+cells*12)
	m, _ := json.Marshal(model)
	b = append(b, `{"model":`...)
	b = append(b, m...)
	b = append(b, `,"task":"regression","X_train":`...)
	b = appendMatrix(b, X)
	b = append(b, `,"y_train":`...)
	b = appendRow(b, y)
	b = append(b, `,"X_test":`...)
	b = appendMatrix(b, Xq)
	if policy != nil {
		b = append(b, `,"memory_policy":`...)
		b = append(b, bytes.TrimSpace(policy)...)
	}
	return append(b, '}')
}

func appendMatrix(b []byte, m [][]float64) []byte {
	b = append(b, '[')
	for i, row := range m {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendRow(b, row)
	}
	return append(b, ']')
}

// appendRow writes row as a JSON array, NaN and ±Inf as null: the wire form
// of both a request's rows and the server's predictions.
func appendRow(b []byte, row []float64) []byte {
	b = append(b, '[')
	for j, v := range row {
		if j > 0 {
			b = append(b, ',')
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			b = append(b, "null"...)
		} else {
			b = strconv.AppendFloat(b, v, 'g', -1, 64)
		}
	}
	return append(b, ']')
}

// call sends body with the retry rules in the Client doc.
func (c *Client) call(ctx context.Context, body []byte) (*wireResponse, error) {
	retries, colds := 0, 0
	var coldSince time.Time
	for attempt := 1; ; attempt++ {
		resp, err := c.attempt(ctx, body)
		if err == nil {
			return resp, nil
		}
		if isCallerDone(ctx) {
			return nil, fmt.Errorf("gateway: %w (last error: %v)", ctx.Err(), err)
		}
		var he *HTTPError
		isHTTP := errors.As(err, &he)
		var te *transportError
		var wait time.Duration
		switch {
		case isHTTP && he.ColdStart && c.coldStartWait > 0:
			if coldSince.IsZero() {
				coldSince = c.now()
			}
			waited := c.now().Sub(coldSince)
			if waited >= c.coldStartWait {
				return nil, fmt.Errorf("gateway: the model did not start within %v: %w", c.coldStartWait, err)
			}
			colds++
			// The last wait ends when the budget does, for one last try.
			wait = min(c.backoff(colds, he.RetryAfter), c.coldStartWait-waited)
		case isHTTP && retryableStatus(he.Status), errors.As(err, &te) && !te.timeout:
			retries++
			if retries > c.maxRetries {
				if attempt == 1 { // no retries of its own: the caller's retries say the rest
					return nil, err
				}
				return nil, fmt.Errorf("gateway: gave up after %d attempts: %w", attempt, err)
			}
			var ra time.Duration
			if isHTTP {
				ra = he.RetryAfter
			}
			wait = c.backoff(retries, ra)
		default:
			return nil, err // the caller's to fix, a timeout, or an unusable answer
		}
		if dl, ok := ctx.Deadline(); ok && c.now().Add(wait).After(dl) {
			return nil, fmt.Errorf("gateway: no time left in the caller's deadline to retry in %v: %w", wait, err)
		}
		c.log.Warn("gateway call failed; retrying", "attempt", attempt, "wait", wait, "err", err)
		if serr := c.sleep(ctx, wait); serr != nil {
			return nil, fmt.Errorf("gateway: %w while waiting to retry (last error: %v)", serr, err)
		}
	}
}

// backoff is the wait before retry n: Retry-After when given, else
// 2^(n−1) s plus jitter; never more than MaxRetryWait.
func (c *Client) backoff(n int, retryAfter time.Duration) time.Duration {
	d := retryAfter
	if d <= 0 {
		d = time.Duration(1<<min(n-1, 10))*time.Second + c.jitter()
	}
	return min(d, MaxRetryWait)
}

// attempt makes one HTTP exchange and classifies its outcome.
func (c *Client) attempt(ctx context.Context, body []byte) (*wireResponse, error) {
	actx, cancel := context.WithTimeout(ctx, c.requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	req.Header.Set("Authorization", "Api-Key "+c.apiKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "regressd-gateway-client")
	res, err := c.http.Do(req)
	if err != nil {
		return nil, c.transportFailure(ctx, actx, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBytes))
	if err != nil {
		return nil, c.transportFailure(ctx, actx, err)
	}
	if res.StatusCode != http.StatusOK {
		return nil, httpError(res, data, c.now())
	}
	var out wireResponse
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("%w: 200 with a body that is not the /predict JSON: %v (%s)", ErrBadResponse, err, snippet(data))
	}
	if out.Predictions == nil {
		return nil, fmt.Errorf("%w: 200 without predictions (%s)", ErrBadResponse, snippet(data))
	}
	return &out, nil
}

// transportFailure wraps a failure to get an answer. Certificate problems
// are not transient: retrying cannot fix them.
func (c *Client) transportFailure(ctx, actx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	if errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn) {
		return fmt.Errorf("gateway: TLS: %w", err)
	}
	return &transportError{err: err, timeout: actx.Err() != nil}
}

// httpError builds the error of a non-200 answer, taking the message from
// the JSON fields gateways use ("error", "message", "detail").
func httpError(res *http.Response, data []byte, now time.Time) *HTTPError {
	e := &HTTPError{Status: res.StatusCode, RetryAfter: parseRetryAfter(res.Header.Get("Retry-After"), now)}
	var body map[string]json.RawMessage
	if json.Unmarshal(data, &body) == nil && body != nil {
		for _, k := range []string{"error", "message", "detail"} {
			if v, ok := body[k]; ok && !isNull(v) {
				var s string
				if json.Unmarshal(v, &s) == nil {
					e.Message = s
				} else {
					e.Message = snippet(v)
				}
				break
			}
		}
		if e.Message == "" {
			e.Message = snippet(data)
		}
		// Some gateways answer a starting model with a JSON 503.
		if res.StatusCode == http.StatusServiceUnavailable && mentionsStarting(e.Message) {
			e.ColdStart = true
		}
		return e
	}
	e.Message = snippet(data)
	switch res.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		e.ColdStart = true
	}
	return e
}

func mentionsStarting(msg string) bool {
	msg = strings.ToLower(msg)
	for _, w := range []string{"loading", "starting", "cold start", "scaled to zero", "warming up"} {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}

// parseRetryAfter reads delay-seconds or an HTTP date; 0 when absent or bad.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 && s < 1e6 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// snippet is the start of a body for messages, on one line.
func snippet(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 200 {
		s = s[:200]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	if s == "" {
		return "empty body"
	}
	return s
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
