package gateway

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/gpu/largectx"
	"github.com/regressd/regressd/httpjson"
)

// Server serves POST /predict. It is safe for concurrent use.
type Server struct {
	cfg      Config
	keys     *KeyStore
	log      *slog.Logger
	limits   *keyLimiters
	gate     *gate
	predict  predictFunc
	now      func() time.Time
	refusals refusals
	keyCells keyCells
}

// predictFunc runs one validated prediction on the engine.
type predictFunc func(ctx context.Context, req engineRequest) (*engineResult, error)

// engineRequest is what the engine is asked to do for one request.
type engineRequest struct {
	Model  string // a built-in slug
	Policy gpu.Policy
	Large  largectx.Config
	X      [][]float64
	Y      []float64
	Xq     [][]float64
	Median bool      // compute the median
	Taus   []float64 // quantile levels to compute; nil: none
}

// NewServer returns a /predict server using the keys and usage tables in db
// (migrated) and the built-in engine. cfg's zero fields take their defaults.
func NewServer(cfg Config, db *pgxpool.Pool, logger *slog.Logger) (*Server, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gateway config: %w", err)
	}
	if db == nil {
		return nil, errors.New("gateway: a database is required for keys and usage")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:    cfg,
		keys:   NewKeyStore(db),
		log:    logger,
		limits: newKeyLimiters(cfg.RatePerMinute, cfg.RateBurst),
		gate:   newGate(cfg.MaxConcurrent, cfg.MaxQueue, cfg.QueueTimeout),
		now:    time.Now,
	}
	s.keyCells.m = make(map[int64]int64)
	s.predict = newEngine(cfg.DeviceMemoryBytes, cfg.HostMemoryBytes, cfg.Metrics)
	return s, nil
}

// Config returns the server's configuration with defaults applied.
func (s *Server) Config() Config { return s.cfg }

// Handler returns the HTTP handler: POST /predict, and JSON errors for
// anything else.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /predict", s.handlePredict)
	mux.HandleFunc("/predict", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "use POST /predict")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such endpoint; the gateway serves POST /predict")
	})
	return mux
}

// predictResponse is the 200 body, wire-compatible with the hosted service
// and the official client.
type predictResponse struct {
	Model        string          `json:"model"`
	Task         string          `json:"task"`
	OutputType   string          `json:"output_type"`
	Predictions  floats          `json:"predictions"`
	Quantiles    floatRows       `json:"quantiles,omitempty"`
	Taus         []float64       `json:"taus,omitempty"`
	Usage        Usage           `json:"usage"`
	MemoryReport json.RawMessage `json:"memory_report"`
	// LargeContextReport is present when the request set
	// large_context_policy.
	LargeContextReport *largectx.Report `json:"large_context_report,omitempty"`
}

func (s *Server) handlePredict(w http.ResponseWriter, r *http.Request) {
	start := s.now()
	reqID := newRequestID()
	w.Header().Set("X-Request-Id", reqID)
	log := s.log.With("request_id", reqID)

	// Authenticate before reading the body: a stranger costs one lookup.
	auth := r.Header.Get("Authorization")
	presented, ok := apiKey(auth)
	if !ok {
		msg := "missing API key: send the header 'Authorization: Bearer <key>' (or 'Authorization: Api-Key <key>')"
		if auth != "" {
			msg = "the Authorization header must read 'Bearer <key>' or 'Api-Key <key>'"
			// Name the scheme sent, never anything that could be the key.
			if scheme, _, ok := strings.Cut(strings.TrimSpace(auth), " "); ok && isSchemeName(scheme) {
				msg += fmt.Sprintf(", not %q…", scheme)
			}
		}
		w.Header().Add("WWW-Authenticate", `Bearer realm="regressd"`)
		w.Header().Add("WWW-Authenticate", `Api-Key realm="regressd"`)
		s.refused(refusedUnauthenticated)
		writeError(w, http.StatusUnauthorized, "unauthorized", msg)
		return
	}
	key, err := s.keys.Authenticate(r.Context(), presented)
	switch {
	case errors.Is(err, ErrUnknownKey):
		// 403 as the hosted service answers a bad key; 401 is kept for a
		// request that presents none.
		s.refused(refusedForbidden)
		writeError(w, http.StatusForbidden, "forbidden", "unknown API key")
		log.Info("predict refused", "status", 403, "reason", "unknown key")
		return
	case errors.Is(err, ErrRevokedKey):
		s.refused(refusedForbidden)
		writeError(w, http.StatusForbidden, "forbidden", "this API key has been revoked")
		log.Info("predict refused", "status", 403, "key", key.Name, "reason", "revoked key")
		return
	case err != nil:
		log.Error("predict: key lookup failed", "err", err)
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the key store is unavailable; retry shortly")
		return
	}
	log = log.With("key", key.Name)

	if ok, wait := s.limits.allow(key.ID, s.now()); !ok {
		secs := max(int(math.Ceil(wait.Seconds())), 1)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		s.refused(refusedRateLimited)
		writeError(w, http.StatusTooManyRequests, "rate_limited", fmt.Sprintf(
			"rate limit of %g requests per minute for this key exceeded; retry in %d s", s.cfg.RatePerMinute, secs))
		log.Info("predict refused", "status", 429, "retry_after_s", secs)
		return
	}

	budget := s.newBudget(key.ID)
	defer budget.release()
	status, model, usage, err := s.serve(w, r, budget)
	var br *badRequest
	switch {
	case errors.As(err, &br):
		status = br.status
		if br.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(br.retryAfter))
		}
		why := br.reason
		if why == "" {
			why = refusedInvalid
		}
		s.refused(why)
		writeError(w, status, codeFor(status), br.msg)
		log.Info("predict refused", "status", status, "model", truncate(model, 64), "err", truncate(br.msg, 512))
	case err != nil:
		status = http.StatusInternalServerError
		writeError(w, status, "internal", "internal error (request "+reqID+"); the operator's log has the details")
		log.Error("predict failed", "model", model, "err", err)
	case status == 0:
		s.refused(refusedAbandoned)
		log.Info("predict abandoned: the caller went away; its work was stopped", "model", model)
		return
	default:
		log.Info("predict", "status", status, "model", model, "context_rows", usage.ContextRows,
			"features", usage.Features, "query_rows", usage.QueryRows, "duration", s.now().Sub(start))
	}
	// Meter after answering; a metering failure must not fail the answer.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	if _, known := gpu.LookupModel(model); !known {
		model = "" // never store an arbitrary slug from the body
	}
	if err := s.keys.Record(ctx, key.ID, model, usage, status == http.StatusOK); err != nil {
		log.Warn("usage not metered", "err", err)
	}
}

// ComputeTimeout bounds one request's fit and prediction: past it the
// engine stops and the caller gets 503.
const ComputeTimeout = 9 * time.Minute

// BodyReadTimeout is how long a /predict body may take to arrive once the
// request has its prediction slot (the body is read only then).
const BodyReadTimeout = time.Minute

// serve reads, validates and answers one authenticated request. It returns
// the status written (0 when the caller left before an answer), the model
// that served (or the name asked for, before one is resolved) and the
// usage; a returned error has not been written yet.
//
// Memory is bounded before the body is read: the prediction slot is taken
// first, so requests waiting for one hold a connection and no matrices,
// and the body is decoded as it streams in, row by row, against the
// request's and its key's cell caps.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, budget *requestBudget) (int, string, Usage, error) {
	if r.ContentLength > s.cfg.MaxBodyBytes {
		return 0, "", Usage{}, s.tooLarge()
	}
	if c := httpjson.Coded(r); c != "" {
		return 0, "", Usage{}, &badRequest{status: http.StatusUnsupportedMediaType, reason: refusedInvalid, msg: httpjson.CodedMessage(c)}
	}
	release, err := s.gate.acquire(r.Context())
	switch {
	case errors.Is(err, errQueueFull), errors.Is(err, errQueueTimeout):
		return 0, "", Usage{}, &badRequest{status: http.StatusServiceUnavailable, retryAfter: 2, reason: refusedBusy, msg: fmt.Sprintf(
			"server busy (%d predictions running, queue full or wait over %v); retry shortly", s.gate.inFlight(), s.cfg.QueueTimeout)}
	case err != nil:
		return 0, "", Usage{}, nil // the caller went away
	}
	defer release()
	// The server's read deadline ran from the request's start, through its
	// wait for a slot: the body gets its own time from now.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(BodyReadTimeout))
	var body io.Reader = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	decode := decodeBody
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == TensorfileContentType {
		decode = decodeTensorfile
	} else {
		// A tensorfile under another content type would fail as JSON
		// with a message about a byte in it; say what it is instead.
		br := bufio.NewReader(body)
		if head, _ := br.Peek(len(tensorfileMagic)); string(head) == tensorfileMagic {
			return 0, "", Usage{}, &badRequest{status: http.StatusUnsupportedMediaType, msg: fmt.Sprintf(
				"the body is a tensorfile (it starts with %s): send it with Content-Type: %s", tensorfileMagic, TensorfileContentType)}
		}
		body = br
	}
	req, err := decode(body, budget)
	if err != nil {
		if r.Context().Err() != nil {
			return 0, "", Usage{}, nil
		}
		return 0, "", Usage{}, err
	}
	return s.answer(w, r, req)
}

// answer checks a decoded request's fields, runs the engine and writes the
// answer.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, req *predictRequest) (int, string, Usage, error) {
	asked := req.Model
	if asked == "" {
		if s.cfg.DefaultModel == "" {
			return 0, "", Usage{}, invalid("model is required: a model slug such as %q (see regressd models)", gpu.Models()[0].Slug)
		}
		asked = s.cfg.DefaultModel
	}
	if err := checkTask(req.Task); err != nil {
		return 0, asked, Usage{}, err
	}
	out, err := parseOutput(req)
	if err != nil {
		return 0, asked, Usage{}, err
	}
	model, known := s.resolveModel(asked)
	info, _ := gpu.LookupModel(model)
	thinking := info.Thinking || isThinkingSlug(asked)
	if req.Policy != nil && thinking {
		return 0, asked, Usage{}, invalid("model %q is a thinking (test-time compute) variant, which does not accept memory_policy; drop memory_policy or use a non-thinking model", truncate(asked, 64))
	}
	if req.LargePolicy != nil && thinking {
		return 0, asked, Usage{}, invalid("model %q is a thinking (test-time compute) variant, which does not accept large_context_policy; drop it or use a non-thinking model", truncate(asked, 64))
	}
	if !known {
		return 0, asked, Usage{}, &badRequest{status: http.StatusNotFound, msg: fmt.Sprintf(
			"model %q is not served here; models: %s", truncate(asked, 64), strings.Join(s.modelNames(), ", "))}
	}
	sp, err := parseMemoryPolicy(req.Policy)
	if err != nil {
		return 0, model, Usage{}, err
	}
	large, hasLarge, err := parseLargeContext(req)
	if err != nil {
		return 0, model, Usage{}, err
	}
	large.Window = s.cfg.LargeContextWindow

	policy, clamped := sp.Policy.ClampHost(s.cfg.HostMemoryBytes, s.cfg.MaxHostBudgetBytes)
	notes := policy.Notes(s.cfg.DeviceMemoryBytes, s.cfg.HostMemoryBytes)
	usage := Usage{
		ContextRows: len(req.X), Features: len(req.X[0]), QueryRows: len(req.Xq),
		InputTokens: req.NonNull, OutputTokens: int64(len(req.Xq)),
	}
	usage.TotalTokens = usage.InputTokens + usage.OutputTokens

	// The answer must be written before the server's write deadline: the
	// engine gets ComputeTimeout, and the deadline moves past it.
	ctx, cancel := context.WithTimeout(r.Context(), ComputeTimeout)
	defer cancel()
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(ComputeTimeout + time.Minute))
	res, err := s.runEngine(ctx, engineRequest{
		Model: model, Policy: policy, Large: large, X: req.X, Y: req.Y, Xq: req.Xq,
		Median: out.Type == OutputMedian, Taus: out.Taus,
	})
	if err != nil {
		if r.Context().Err() != nil {
			return 0, model, Usage{}, nil // the caller went away; the engine stopped
		}
		if ctx.Err() != nil {
			return 0, model, Usage{}, &badRequest{status: http.StatusServiceUnavailable, retryAfter: 30, reason: refusedBusy, msg: fmt.Sprintf(
				"the prediction did not finish within %v; send a shorter context (or a large_context_policy) or fewer query rows per request", ComputeTimeout)}
		}
		return 0, model, Usage{}, engineError(err)
	}
	if len(res.Mean) != len(req.Xq) {
		return 0, model, Usage{}, fmt.Errorf("engine returned %d predictions for %d query rows", len(res.Mean), len(req.Xq))
	}
	report, err := memoryReportJSON(res.Memory, sp, clamped, notes)
	if err != nil {
		return 0, model, Usage{}, err
	}
	resp := predictResponse{Model: model, Task: "regression", OutputType: out.Type, Predictions: res.Mean, Usage: usage, MemoryReport: report}
	if out.Type == OutputMedian {
		resp.Predictions = res.Median
	}
	if out.Taus != nil {
		resp.Quantiles, resp.Taus = res.Quantiles, res.Taus
	}
	if hasLarge {
		resp.LargeContextReport = &res.Large
	}
	writeJSON(w, http.StatusOK, resp)
	return http.StatusOK, model, usage, nil
}

// runEngine calls the engine, turning a panic into an error so one bad
// request cannot take the server down.
func (s *Server) runEngine(ctx context.Context, req engineRequest) (res *engineResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("engine panic: %v", p)
		}
	}()
	return s.predict(ctx, req)
}

func (s *Server) tooLarge() error {
	return &badRequest{status: http.StatusRequestEntityTooLarge, reason: refusedBodyTooLarge, msg: fmt.Sprintf(
		"the body is over this gateway's limit of %d bytes; send fewer context or query rows per request", s.cfg.MaxBodyBytes)}
}

// apiKey extracts the key from "Bearer <key>" (the official client's
// default) or "Api-Key <key>", the scheme matched case-insensitively.
func apiKey(h string) (string, bool) {
	scheme, key, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !(strings.EqualFold(scheme, "Bearer") || strings.EqualFold(scheme, "Api-Key")) {
		return "", false
	}
	key = strings.TrimSpace(key)
	return key, key != "" && !strings.ContainsAny(key, " \t")
}

// isSchemeName tells a short alphabetic word such as Bearer or Basic.
func isSchemeName(s string) bool {
	if len(s) == 0 || len(s) > 16 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// isThinkingSlug recognises the hosted service's thinking variants
// ("…-thinking-medium") even for slugs not served here, so the caller learns
// that memory_policy is the problem.
func isThinkingSlug(slug string) bool { return strings.Contains(slug, "-thinking") }

func modelSlugs() []string {
	var out []string
	for _, m := range gpu.Models() {
		out = append(out, m.Slug)
	}
	return out
}

// modelNames lists the built-in slugs, then the aliases.
func (s *Server) modelNames() []string {
	out := modelSlugs()
	var aliases []string
	for a := range s.cfg.ModelAliases {
		aliases = append(aliases, a)
	}
	slices.Sort(aliases)
	return append(out, aliases...)
}

func codeFor(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request"
	case http.StatusNotFound:
		return "model_not_found"
	case http.StatusRequestEntityTooLarge:
		return "body_too_large"
	case http.StatusUnprocessableEntity:
		return "context_too_large"
	case http.StatusServiceUnavailable:
		return "busy"
	}
	return strings.ToLower(strings.ReplaceAll(http.StatusText(status), " ", "_"))
}

// errorBody is every error's JSON: the message under "error" (the hosted
// service's field) and "message" (other gateways'), and a stable code.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	Code    string `json:"code"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{Error: msg, Message: msg, Code: code})
}

func writeJSON(w http.ResponseWriter, status int, v any) { WriteJSON(w, status, v, "") }

// WriteJSON answers v as JSON with status, indented by indent: see
// httpjson.Write.
func WriteJSON(w http.ResponseWriter, status int, v any, indent string) {
	httpjson.Write(w, status, v, indent)
}

func newRequestID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// floats encodes NaN and ±Inf as null, as the hosted service does for a
// prediction it cannot make.
type floats []float64

func (f floats) MarshalJSON() ([]byte, error) {
	return appendRow(make([]byte, 0, 2+len(f)*20), f), nil
}

// floatRows is floats by row: the quantiles block, null for non-finite.
type floatRows [][]float64

func (rows floatRows) MarshalJSON() ([]byte, error) {
	b := []byte{'['}
	for i, r := range rows {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendRow(b, r)
	}
	return append(b, ']'), nil
}
