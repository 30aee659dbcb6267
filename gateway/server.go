package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/httpjson"
)

// Server serves POST /predict. It is safe for concurrent use.
type Server struct {
	cfg     Config
	keys    *KeyStore
	log     *slog.Logger
	limits  *keyLimiters
	gate    *gate
	predict predictFunc
	now     func() time.Time
}

// predictFunc runs one validated prediction on the engine and returns the
// predictions and the engine's memory report as a JSON object.
type predictFunc func(ctx context.Context, req engineRequest) ([]float64, json.RawMessage, error)

// engineRequest is what the engine is asked to do for one request.
type engineRequest struct {
	Model  string
	Policy gpu.Policy
	X      [][]float64
	Y      []float64
	Xq     [][]float64
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

// predictResponse is the 200 body, wire-compatible with the hosted service.
type predictResponse struct {
	Model        string          `json:"model"`
	Task         string          `json:"task"`
	Predictions  floats          `json:"predictions"`
	Usage        Usage           `json:"usage"`
	MemoryReport json.RawMessage `json:"memory_report"`
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
		msg := "missing API key: send the header 'Authorization: Api-Key <key>'"
		if auth != "" {
			msg = "the Authorization header must read 'Api-Key <key>'"
			// Name the scheme sent, never anything that could be the key.
			if scheme, _, ok := strings.Cut(strings.TrimSpace(auth), " "); ok && isSchemeName(scheme) {
				msg += fmt.Sprintf(", not %q…", scheme)
			}
		}
		w.Header().Set("WWW-Authenticate", `Api-Key realm="regressd"`)
		writeError(w, http.StatusUnauthorized, "unauthorized", msg)
		return
	}
	key, err := s.keys.Authenticate(r.Context(), presented)
	switch {
	case errors.Is(err, ErrUnknownKey):
		// 403 as the hosted service answers a bad key; 401 is kept for a
		// request that presents none.
		writeError(w, http.StatusForbidden, "forbidden", "unknown API key")
		log.Info("predict refused", "status", 403, "reason", "unknown key")
		return
	case errors.Is(err, ErrRevokedKey):
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
		secs := int(math.Ceil(wait.Seconds()))
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
		writeError(w, http.StatusTooManyRequests, "rate_limited", fmt.Sprintf(
			"rate limit of %g requests per minute for this key exceeded; retry in %d s", s.cfg.RatePerMinute, max(secs, 1)))
		log.Info("predict refused", "status", 429, "retry_after_s", secs)
		return
	}

	status, model, usage, err := s.serve(w, r, log)
	var br *badRequest
	switch {
	case errors.As(err, &br):
		status = br.status
		if br.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(br.retryAfter))
		}
		writeError(w, status, codeFor(status), br.msg)
		log.Info("predict refused", "status", status, "model", model, "err", br.msg)
	case err != nil:
		status = http.StatusInternalServerError
		writeError(w, status, "internal", "internal error (request "+reqID+"); the operator's log has the details")
		log.Error("predict failed", "model", model, "err", err)
	case status == 0:
		log.Info("predict abandoned: the caller went away", "model", model)
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

// serve reads, validates and answers one authenticated request. It returns
// the status written (0 when the caller left before an answer), the model
// and the usage; a returned error has not been written yet.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, log *slog.Logger) (int, string, Usage, error) {
	if r.ContentLength > s.cfg.MaxBodyBytes {
		return 0, "", Usage{}, s.tooLarge()
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return 0, "", Usage{}, s.tooLarge()
		}
		return 0, "", Usage{}, invalid("could not read the body: %v", err)
	}
	fields, err := decodeEnvelope(body)
	if err != nil {
		return 0, "", Usage{}, err
	}
	var req predictRequest
	if req.Model, err = stringField(fields, "model"); err != nil {
		return 0, "", Usage{}, err
	}
	if req.Model == "" {
		if s.cfg.DefaultModel == "" {
			return 0, "", Usage{}, invalid("model is required: a model slug such as %q (see regressd models)", gpu.Models()[0].Slug)
		}
		req.Model = s.cfg.DefaultModel
	}
	task, err := stringField(fields, "task")
	if err != nil {
		return 0, req.Model, Usage{}, err
	}
	if task != "" && task != "regression" {
		return 0, req.Model, Usage{}, invalid("task %q is not supported: this gateway serves task \"regression\"", task)
	}
	if raw, ok := fields["memory_policy"]; ok && !isNull(raw) {
		req.Policy = raw
	}
	info, known := gpu.LookupModel(req.Model)
	if req.Policy != nil && (info.Thinking || isThinkingSlug(req.Model)) {
		return 0, req.Model, Usage{}, invalid("model %q is a thinking (test-time compute) variant, which does not accept memory_policy; drop memory_policy or use a non-thinking model", req.Model)
	}
	if !known {
		return 0, req.Model, Usage{}, &badRequest{status: http.StatusNotFound, msg: fmt.Sprintf(
			"model %q is not served here; models: %s", req.Model, strings.Join(modelSlugs(), ", "))}
	}
	policy, err := gpu.ParsePolicy(req.Policy)
	if err != nil {
		return 0, req.Model, Usage{}, invalid("%v", err)
	}
	if err := decodeData(fields, &req); err != nil {
		return 0, req.Model, Usage{}, err
	}
	body, fields = nil, nil // let the collector have the raw body while we compute

	policy, clamped := policy.ClampHost(s.cfg.HostMemoryBytes, s.cfg.MaxHostBudgetBytes)
	notes := policy.Notes(s.cfg.DeviceMemoryBytes, s.cfg.HostMemoryBytes)
	usage := Usage{
		ContextRows: len(req.X), Features: len(req.X[0]), QueryRows: len(req.Xq),
		InputTokens: req.NonNull, OutputTokens: int64(len(req.Xq)),
	}
	usage.TotalTokens = usage.InputTokens + usage.OutputTokens

	release, err := s.gate.acquire(r.Context())
	switch {
	case errors.Is(err, errQueueFull), errors.Is(err, errQueueTimeout):
		w.Header().Set("Retry-After", "2")
		return 0, req.Model, Usage{}, &badRequest{status: http.StatusServiceUnavailable, msg: fmt.Sprintf(
			"server busy (%d predictions running, queue full or wait over %v); retry shortly", s.gate.inFlight(), s.cfg.QueueTimeout)}
	case err != nil:
		return 0, req.Model, Usage{}, nil // the caller went away
	}
	preds, report, err := s.runEngine(r.Context(), engineRequest{Model: req.Model, Policy: policy, X: req.X, Y: req.Y, Xq: req.Xq})
	release()
	if err != nil {
		if r.Context().Err() != nil {
			return 0, req.Model, Usage{}, nil // the caller went away; the engine stopped
		}
		return 0, req.Model, Usage{}, engineError(err)
	}
	if len(preds) != len(req.Xq) {
		return 0, req.Model, Usage{}, fmt.Errorf("engine returned %d predictions for %d query rows", len(preds), len(req.Xq))
	}
	report, err = withServerFields(report, clamped, notes)
	if err != nil {
		return 0, req.Model, Usage{}, err
	}
	resp := predictResponse{Model: req.Model, Task: "regression", Predictions: preds, Usage: usage, MemoryReport: report}
	writeJSON(w, http.StatusOK, resp)
	return http.StatusOK, req.Model, usage, nil
}

// runEngine calls the engine, turning a panic into an error so one bad
// request cannot take the server down.
func (s *Server) runEngine(ctx context.Context, req engineRequest) (preds []float64, report json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("engine panic: %v", p)
		}
	}()
	return s.predict(ctx, req)
}

func (s *Server) tooLarge() error {
	return &badRequest{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf(
		"the body is over this gateway's limit of %d bytes; send fewer context or query rows per request", s.cfg.MaxBodyBytes)}
}

// withServerFields adds the hosted-only clamped and notes to the engine's
// report object, keeping the engine's field order.
func withServerFields(report json.RawMessage, clamped, notes []string) (json.RawMessage, error) {
	report = bytes.TrimSpace(report)
	if len(report) < 2 || report[0] != '{' || report[len(report)-1] != '}' {
		return nil, fmt.Errorf("engine memory report is not a JSON object: %.60q", report)
	}
	if clamped == nil {
		clamped = []string{}
	}
	if notes == nil {
		notes = []string{}
	}
	extra, err := json.Marshal(struct {
		Clamped []string `json:"clamped"`
		Notes   []string `json:"notes"`
	}{clamped, notes})
	if err != nil {
		return nil, err
	}
	inner := bytes.TrimSpace(report[1 : len(report)-1])
	var out bytes.Buffer
	out.WriteByte('{')
	if len(inner) > 0 {
		out.Write(inner)
		out.WriteByte(',')
	}
	out.Write(extra[1:])
	return out.Bytes(), nil
}

// apiKey extracts the key from "Api-Key <key>" (scheme case-insensitive).
func apiKey(h string) (string, bool) {
	scheme, key, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Api-Key") {
		return "", false
	}
	key = strings.TrimSpace(key)
	return key, key != ""
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
