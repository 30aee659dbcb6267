package scheduler

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/regressd/regressd/httpauth"
	"github.com/regressd/regressd/httpjson"
	"github.com/regressd/regressd/schemas"
)

// Body limits.
const (
	MaxEngineBody = 10 << 20 // bytes; larger engine requests get 413
	maxAdminBody  = 1 << 20
	// MaxServiceKey is the longest model-service key taken, in bytes: the
	// sealed key travels in a NATS header, which holds 64 KB in all.
	MaxServiceKey = 4096
)

// HeaderServiceKey carries the model-service key on the engine endpoint;
// HeaderNoriKey is the plugin's original name for it, also taken.
const (
	HeaderServiceKey = "X-Service-Api-Key"
	HeaderNoriKey    = "X-Nori-Api-Key"
)

// bodyKeys are the keys an engine request body may set.
var bodyKeys = map[string]bool{
	"measurement": true, "field": true, "feature_fields": true, "tags": true, "window": true,
	"start_time": true, "end_time": true, "dry_run": true,
}

// Routes registers the engine endpoint and the admin API on mux.
func (s *Scheduler) Routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v3/engine/{trigger}", s.auth(jsonOnly(s.handleEngine)))
	mux.HandleFunc("GET /api/v3/engine/{trigger}/tasks/{task}", s.auth(s.handleTask))
	const base = "/api/v3/configure/processing_engine_trigger"
	mux.HandleFunc("GET "+base, s.auth(s.handleList))
	mux.HandleFunc("POST "+base, s.auth(jsonOnly(s.handleCreate)))
	mux.HandleFunc("DELETE "+base, s.auth(s.handleDelete))
	mux.HandleFunc("GET "+base+"/{name}", s.auth(s.handleShow))
	mux.HandleFunc("DELETE "+base+"/{name}", s.auth(s.handleDelete))
	mux.HandleFunc("POST "+base+"/enable", s.auth(jsonOnly(s.handleEnable(false))))
	mux.HandleFunc("POST "+base+"/disable", s.auth(jsonOnly(s.handleEnable(true))))
}

// jsonOnly refuses a request that is not declared application/json, or
// whose body is compressed, with 415. A page on another site can send a form or text/plain POST without
// the browser asking first (CSRF); application/json it cannot.
func jsonOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			writeJSON(w, http.StatusUnsupportedMediaType, map[string]any{"status": "failed",
				"message": "send the request as JSON: Content-Type: application/json (even with an empty body)"})
			return
		}
		if c := httpjson.Coded(r); c != "" {
			writeJSON(w, http.StatusUnsupportedMediaType, map[string]any{"status": "failed", "message": httpjson.CodedMessage(c)})
			return
		}
		h(w, r)
	}
}

// auth enforces regressd's own request authorization when tokens are set.
func (s *Scheduler) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !httpauth.Allowed(s.cfg.AuthTokens, r) {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"status": "failed", "message": httpauth.Message})
			return
		}
		h(w, r)
	}
}

func (s *Scheduler) handleEngine(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	// The key is asked for before the trigger is looked up: a caller
	// without one learns nothing of which triggers exist.
	key := s.serviceKey(r)
	if key == "" {
		msg := "no model-service key: send it in the " + HeaderServiceKey + " (or " + HeaderNoriKey + ") header, or set SERVICE_API_KEY in the server's environment"
		if r.Header.Get("Authorization") != "" {
			msg += " (the Authorization header is regressd's own request authorization and never reaches the model service)"
		}
		writeFailed(w, http.StatusUnauthorized, "", msg)
		return
	}
	if len(key) > MaxServiceKey {
		writeFailed(w, http.StatusBadRequest, "", fmt.Sprintf("the model-service key is %d bytes, over the limit of %d", len(key), MaxServiceKey))
		return
	}
	t, err := s.store.FindRequest(ctx, r.PathValue("trigger"))
	if err != nil {
		status := http.StatusInternalServerError
		if errors.Is(err, ErrTriggerNotFound) {
			status = http.StatusNotFound
		}
		writeFailed(w, status, "", err.Error())
		return
	}
	if t.Disabled {
		writeFailed(w, http.StatusConflict, "", fmt.Sprintf("trigger %q is disabled; enable it with 'regressd trigger enable %s'", t.Name, t.Name))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxEngineBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeFailed(w, http.StatusRequestEntityTooLarge, "", fmt.Sprintf("request body over %d bytes", MaxEngineBody))
			return
		}
		writeFailed(w, http.StatusBadRequest, "", "read body: "+err.Error())
		return
	}
	targs, fromFile, err := ExpandArgs(t.Args, s.cfg.ConfigDir)
	if err != nil {
		s.log.Error("trigger's arguments cannot be read", "trigger", t.Name, "err", err)
		writeFailed(w, http.StatusInternalServerError, "", fmt.Sprintf("trigger %q: its configuration could not be read; see the server log", t.Name))
		return
	}
	if raw, _ := bodyObject(body); fromFile && len(raw) > 0 {
		writeFailed(w, http.StatusBadRequest, "", errBodyWithConfigFile.Error())
		return
	}
	req, err := ParseEngineBody(body, targs)
	if err != nil {
		writeFailed(w, http.StatusBadRequest, "", err.Error())
		return
	}
	args, err := ResolveArgs(req.Args, false, s.cfg.Models)
	if err != nil {
		writeFailed(w, http.StatusBadRequest, "", err.Error())
		return
	}
	start, end, err := ResolveWindow(req.Start, req.End, time.Duration(args.Window), time.Now())
	if err != nil {
		writeFailed(w, http.StatusBadRequest, "", err.Error())
		return
	}
	// A request is a run of its own, as the plugin's are, unless its
	// window's last run is still under way (see PublishRequest).
	taskID, err := s.submit(ctx, t.Name, args, start, end, req.DryRun, originWebhook, key)
	if err != nil {
		s.log.Error("publish job", "trigger", t.Name, "err", err)
		writeFailed(w, http.StatusServiceUnavailable, taskID, "could not queue the run; see the server log")
		return
	}
	wctx, cancel := s.waitContext(ctx, s.cfg.WaitTimeout)
	defer cancel()
	sum, err := s.pub.Wait(wctx, taskID)
	if err != nil {
		msg := "still running; poll GET /api/v3/engine/" + r.PathValue("trigger") + "/tasks/" + taskID
		if s.stopping.Load() {
			msg = "this server is shutting down; the run goes on in the pipeline: " + msg
		}
		writeJSON(w, http.StatusAccepted, map[string]any{"status": schemas.StatusRunning, "task_id": taskID,
			"result":  map[string]any{"status": schemas.StatusRunning, "written": sum.Written},
			"message": msg})
		return
	}
	writeSummary(w, sum)
}

// serviceKey is the model-service key of an engine call: its
// X-Service-Api-Key header, else its X-Nori-Api-Key header, else
// SERVICE_API_KEY from the server's environment (as the plugin falls back
// to its environment's key). An empty header counts as none. Never from
// the body or the arguments.
func (s *Scheduler) serviceKey(r *http.Request) string {
	for _, h := range []string{HeaderServiceKey, HeaderNoriKey} {
		if k := strings.TrimSpace(r.Header.Get(h)); k != "" {
			return k
		}
	}
	return s.cfg.ServiceKey
}

// handleTask answers a task's state under its trigger's request path, or
// under its trigger's name (a scheduled trigger has no path).
func (s *Scheduler) handleTask(w http.ResponseWriter, r *http.Request) {
	path := r.PathValue("trigger")
	if !taskIDRE.MatchString(r.PathValue("task")) {
		writeFailed(w, http.StatusNotFound, "", fmt.Sprintf("no such task for this trigger: %q is not a task id", httpjson.Truncate(r.PathValue("task"), maxEcho)))
		return
	}
	sum, ok, err := s.pub.Task(r.Context(), r.PathValue("task"))
	if err == nil && ok && sum.Trigger != path {
		t, ferr := s.store.FindRequest(r.Context(), path)
		ok = ferr == nil && t.Name == sum.Trigger
	}
	switch {
	case err != nil:
		writeFailed(w, http.StatusInternalServerError, "", err.Error())
	case !ok:
		writeFailed(w, http.StatusNotFound, r.PathValue("task"), "no such task for this trigger")
	default:
		writeJSON(w, http.StatusOK, sum)
	}
}

// taskIDRE matches what may be a task id (schemas.TaskID makes t_ and 20
// hex digits): anything else ("*", "a.b") is no task, not a bucket key.
var taskIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// writeSummary answers an engine call from a task's final summary: HTTP
// 200 for every outcome of a run, its status mirrored at the top level
// (success, partial, skipped, dry_run, failed), as the plugin answers.
func writeSummary(w http.ResponseWriter, sum schemas.TaskSummary) {
	result := map[string]any{
		"status": sum.Status, "written": sum.Written, "context_rows": sum.ContextRows,
		"query_rows": sum.QueryRows, "read_rows": sum.ReadRows, "window_start": sum.Start, "window_end": sum.End,
	}
	if sum.Message != "" {
		result["message"] = sum.Message
	}
	if sum.Status == schemas.StatusPartial || sum.Status == schemas.StatusFailed {
		result["remaining"] = sum.Remaining
	}
	if sum.ReadTruncated {
		result["read_truncated"] = true
	}
	if sum.SkippedExisting > 0 || sum.Status == schemas.StatusSkipped {
		result["skipped_existing"] = sum.SkippedExisting
	}
	if sum.Batches > 0 {
		result["outside_range"] = sum.OutsideRange
	}
	if sum.Status == schemas.StatusDryRun {
		preds, times, quantiles := dryRunColumns(sum.Predictions)
		result["predictions"], result["times"] = preds, times
		if quantiles != nil {
			result["quantiles"] = quantiles
		}
	}
	addSeriesResult(result, sum)
	out := map[string]any{"status": sum.Status, "task_id": sum.TaskID, "result": result}
	if sum.Status == schemas.StatusFailed {
		out["message"] = sum.Message
		if sum.Code != 0 {
			// What an HTTP status would have said: 4xx when the input was
			// at fault, 5xx when the model side was.
			out["code"] = sum.Code
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// EngineRequest is a parsed engine request body merged with trigger
// arguments: Args in their string form, and the window bounds and dry_run
// they give.
type EngineRequest struct {
	Args       map[string]string
	Start, End *time.Time
	DryRun     bool
}

// bodyKeyList is bodyKeys for messages.
const bodyKeyList = "dry_run, end_time, feature_fields, field, measurement, start_time, tags, window"

// ParseEngineBody parses an engine request body over a trigger's
// arguments. The body may set only the eight bodyKeys, and none that the
// trigger's arguments set; JSON null means "use the default". Every
// problem is reported at once.
func ParseEngineBody(body []byte, triggerArgs map[string]string) (EngineRequest, error) {
	req := EngineRequest{Args: map[string]string{}}
	for k, v := range triggerArgs {
		req.Args[k] = v
	}
	raw, errs := bodyObject(body)
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := raw[k]
		if err := bodyKeyAllowed(k); err != nil {
			errs = append(errs, err)
			continue
		}
		if pinned, ok := triggerArgs[k]; ok && strings.TrimSpace(pinned) != "" {
			errs = append(errs, fmt.Errorf("%s is set by the trigger's arguments and cannot be overridden by the request", k))
			continue
		}
		if string(v) == "null" {
			continue
		}
		s, err := bodyString(k, v)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		req.Args[k] = s
	}
	if err := errors.Join(errs...); err != nil {
		return req, err
	}
	// The window bounds and dry_run, from the body or the trigger.
	var run Run
	if errs = resolveRunArgs(req.Args, &run, nil); len(errs) > 0 {
		return req, errors.Join(errs...)
	}
	req.Start, req.End, req.DryRun = run.Start, run.End, run.DryRun
	return req, nil
}

// bodyObject parses a request body: nothing, or a JSON object in UTF-8
// whose keys (and tags' keys) are each given once.
func bodyObject(body []byte) (map[string]json.RawMessage, []error) {
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil, nil
	}
	if err := httpjson.UTF8(body, 0); err != nil {
		return nil, []error{err}
	}
	if err := httpjson.Syntax(body); err != nil {
		return nil, []error{err}
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return nil, []error{fmt.Errorf("the body must be a JSON object, got %s", httpjson.Kind(body))}
	}
	// encoding/json keeps the last of duplicate keys; a body that says two
	// things is refused, as duplicate trigger arguments and tags are.
	var errs []error
	for _, k := range duplicateKeys(body) {
		errs = append(errs, fmt.Errorf("body key %q given twice", httpjson.Truncate(k, maxEcho)))
	}
	for _, k := range duplicateKeys(raw["tags"]) {
		errs = append(errs, fmt.Errorf("tags: key %q given twice", httpjson.Truncate(k, maxEcho)))
	}
	return raw, errs
}

// bodyKeyAllowed refuses a body key that is not one of the eight a body
// may set, saying why: a retired parameter, an operator's setting (the
// model, the write targets, the caps, the config file), or an unknown key.
func bodyKeyAllowed(k string) error {
	if bodyKeys[k] {
		return nil
	}
	if why, retired := retiredArgs[k]; retired {
		return fmt.Errorf("body key %q is not accepted: %s", k, why)
	}
	if _, known := argDefaults[k]; known || k == ArgConfigFile || slices.Contains(requiredArgs, k) {
		return fmt.Errorf("body key %q is an operator setting: set it in the trigger's arguments (or its config file); a request body may set only %s", k, bodyKeyList)
	}
	return fmt.Errorf("unknown body key %q (allowed: %s)", httpjson.Truncate(k, maxEcho), bodyKeyList)
}

// duplicateKeys returns the keys that a JSON object names more than once,
// in order, each once; nothing for anything but a valid object. Nested
// values are not looked into.
func duplicateKeys(obj []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	seen := map[string]int{}
	var dups []string
	for dec.More() {
		tok, err := dec.Token()
		k, ok := tok.(string)
		if err != nil || !ok {
			return dups
		}
		if seen[k]++; seen[k] == 2 {
			dups = append(dups, k)
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return dups
		}
	}
	return dups
}

// bodyString turns a body value into the argument string form: lists may be
// JSON arrays (whose names may hold spaces), tags a JSON object.
func bodyString(k string, v json.RawMessage) (string, error) {
	switch k {
	case "dry_run":
		// The plugin casts body values as it casts arguments, so the
		// string forms arguments accept ("true", "yes", "1") work too.
		var b bool
		if err := json.Unmarshal(v, &b); err == nil {
			return strconv.FormatBool(b), nil
		}
		s := string(v)        // a number (1, 0) as written
		json.Unmarshal(v, &s) // a string ("yes") as its text
		if b, err := parseBool(s); err == nil {
			return strconv.FormatBool(b), nil
		}
		return "", errors.New(`dry_run must be true or false (or "true", "yes", "1", 1 and their opposites)`)
	case "start_time", "end_time":
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", fmt.Errorf("%s must be an ISO 8601 string", k)
		}
		return s, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		return s, nil
	}
	switch k {
	case "feature_fields":
		var list []string
		if err := json.Unmarshal(v, &list); err == nil {
			return FeatureList(list), nil
		}
		return "", errors.New("feature_fields must be a string of space-separated names or an array of strings")
	case "tags":
		var m map[string]string
		if err := json.Unmarshal(v, &m); err == nil {
			return schemas.FormatTags(m), nil // escaped: any value reads back as sent
		}
		return "", errors.New(`tags must be "k:v k2:v2" or an object of strings`)
	}
	return "", fmt.Errorf("%s must be a string", k)
}

func writeFailed(w http.ResponseWriter, status int, taskID, msg string) {
	body := map[string]any{"status": schemas.StatusFailed, "message": httpjson.Truncate(msg, maxMessage)}
	if taskID != "" {
		body["task_id"] = taskID
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) { httpjson.Write(w, status, v, "  ") }

// logger for a task: every line carries the task id.
func (s *Scheduler) taskLog(taskID string) *slog.Logger { return s.log.With("task_id", taskID) }
