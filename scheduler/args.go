package scheduler

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/regressd/regressd/httpjson"
	"github.com/regressd/regressd/schemas"
)

// Argument keys and their defaults. The seed's keys come first, then ours.
var argDefaults = map[string]string{
	"tags":               "",
	"window":             "30d",
	"min_history":        "50",
	"max_train_rows":     "1000",
	"skip_existing":      "true",
	"predict_batch_size": "1000",
	"request_timeout":    "300s",
	"max_predict_rows":   "5000",
	"max_read_rows":      "50000",
	"max_retries":        "3",
	// The plugin's: where predictions go, and a fixed window or a dry run
	// as arguments (see run.go).
	"output_measurement": "",
	"target_database":    "",
	"start_time":         "",
	"end_time":           "",
	"dry_run":            "false",
}

var requiredArgs = []string{"measurement", "field", "feature_fields", "model"}

// retiredArgs are refused by name with the reason, never silently ignored:
// ours, and the parameters the plugin retired.
var retiredArgs = map[string]string{
	"api_key":         "keys are never accepted in trigger arguments (they are logged); send X-Service-Api-Key or set SERVICE_API_KEY in the server's environment",
	"service_api_key": "keys are never accepted in trigger arguments (they are logged); send X-Service-Api-Key or set SERVICE_API_KEY in the server's environment",
	"batch_size":      "renamed predict_batch_size",
	"gateway_url":     "the gateway is not a parameter, since the request carries the model-service key: start the worker with --gateway-url (or REGRESSD_GATEWAY_URL)",
	"mode":            "regressd only does regression; the forecast mode was removed",
	"horizon":         "forecasting was removed; regressd fills rows whose target is empty",
	"step":            "forecasting was removed; regressd fills rows whose target is empty",
	"lags":            "forecasting was removed; the model sees only the columns named in feature_fields",
	"rolling":         "forecasting was removed; the model sees only the columns named in feature_fields",
	"tz":              "no time-derived features are computed, so no time zone is needed",
}

// ValidArgs lists every accepted argument key, sorted; config_file_path
// is accepted alone (see ExpandArgs).
func ValidArgs() []string {
	keys := append([]string{ArgConfigFile}, requiredArgs...)
	for k := range argDefaults {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ModelCheck reports whether a model slug can be served: built in, or
// routable to a gateway. nil accepts any well-formed slug.
type ModelCheck func(slug string) error

// SplitArgs splits the seed's comma-separated key=value form into a map,
// reporting malformed pieces and duplicate keys, all at once.
func SplitArgs(s string) (map[string]string, error) {
	out := map[string]string{}
	var errs []error
	for _, piece := range strings.Split(s, ",") {
		piece = strings.TrimSpace(piece)
		if piece == "" {
			continue
		}
		k, v, ok := strings.Cut(piece, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			errs = append(errs, fmt.Errorf("argument %q is not key=value", httpjson.Truncate(piece, maxEcho)))
			continue
		}
		if _, dup := out[k]; dup {
			errs = append(errs, fmt.Errorf("argument %q given twice", httpjson.Truncate(k, maxEcho)))
			continue
		}
		out[k] = v
	}
	return out, errors.Join(errs...)
}

// FormatArgs writes arguments back in the comma-separated form, keys sorted.
func FormatArgs(args map[string]string) string {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + args[k]
	}
	return strings.Join(parts, ",")
}

// CheckKeys reports unknown and retired keys.
func CheckKeys(args map[string]string) error {
	var errs []error
	valid := map[string]bool{}
	for _, k := range ValidArgs() {
		valid[k] = true
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if why, ok := retiredArgs[k]; ok {
			errs = append(errs, fmt.Errorf("argument %q is not accepted: %s", k, why))
		} else if k == ArgConfigFile {
			errs = append(errs, fmt.Errorf("%s supplies every argument, so it cannot be combined with inline arguments", ArgConfigFile))
		} else if !valid[k] {
			errs = append(errs, fmt.Errorf("unknown argument %q (valid: %s)", httpjson.Truncate(k, maxEcho), strings.Join(ValidArgs(), ", ")))
		}
	}
	return errors.Join(errs...)
}

// ResolveArgs validates arguments and fills defaults (ResolveRun's
// RunArgs).
func ResolveArgs(args map[string]string, partial bool, models ModelCheck) (schemas.RunArgs, error) {
	run, err := ResolveRun(args, partial, models)
	return run.Args, err
}

// ResolveRun validates arguments and fills defaults. With partial set,
// missing required keys that a request body may supply (bodyKeys) are
// allowed: a request trigger may leave them to the body, but not model,
// which no request can give. Everything present is still checked. All
// problems are reported at once.
func ResolveRun(args map[string]string, partial bool, models ModelCheck) (Run, error) {
	var run Run
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	add(CheckKeys(args))
	add(checkValues(args))
	get := func(k string) string {
		if v, ok := args[k]; ok {
			return v
		}
		return argDefaults[k]
	}
	var r schemas.RunArgs
	for _, k := range requiredArgs {
		switch {
		case strings.TrimSpace(args[k]) != "":
		case !partial:
			errs = append(errs, fmt.Errorf("argument %q is required", k))
		case !bodyKeys[k]:
			errs = append(errs, fmt.Errorf("argument %q is required: a request body cannot supply it", k))
		}
	}
	r.Measurement = strings.TrimSpace(args["measurement"])
	r.Field = strings.TrimSpace(args["field"])
	r.Model = strings.TrimSpace(args["model"])
	if r.Measurement != "" {
		add(checkIdent("measurement", r.Measurement))
		if n := len(r.Measurement) + len("_regressed"); n > 63 && strings.TrimSpace(args["output_measurement"]) == "" {
			errs = append(errs, fmt.Errorf("measurement %q is too long: %q would pass PostgreSQL's 63-byte identifier limit (or name the output table with output_measurement)", r.Measurement, r.Measurement+"_regressed"))
		}
	}
	if r.Field != "" {
		add(checkIdent("field", r.Field))
		if r.Field == "time" {
			errs = append(errs, errors.New(`field "time" is the timestamp column, not a field`))
		}
	}
	if f := args["feature_fields"]; strings.TrimSpace(f) != "" {
		r.FeatureFields, errs = parseFeatures(f, r.Field, errs)
	}
	if r.Model != "" {
		if err := checkModelSlug(r.Model); err != nil {
			errs = append(errs, err)
		} else if models != nil {
			add(models(r.Model))
		}
	}
	var err error
	if r.Tags, err = ParseTags(get("tags")); err != nil {
		errs = append(errs, err)
	}
	for _, k := range slices.Sorted(maps.Keys(r.Tags)) {
		if v := r.Tags[k]; !utf8.ValidString(k+v) || strings.ContainsRune(k+v, 0) {
			errs = append(errs, fmt.Errorf("tags: %q holds a NUL byte or invalid UTF-8 once unescaped, which PostgreSQL cannot take", httpjson.Truncate(k, 64)))
		}
	}
	if r.Window, err = schemas.ParseDuration(get("window")); err != nil {
		errs = append(errs, fmt.Errorf("window: %w", err))
	}
	if r.RequestTimeout, err = schemas.ParseDuration(get("request_timeout")); err != nil {
		errs = append(errs, fmt.Errorf("request_timeout: %w", err))
	}
	if r.SkipExisting, err = parseBool(get("skip_existing")); err != nil {
		errs = append(errs, fmt.Errorf("skip_existing: %w", err))
	}
	ints := []struct {
		key string
		dst *int
	}{
		{"min_history", &r.MinHistory}, {"max_train_rows", &r.MaxTrainRows},
		{"predict_batch_size", &r.PredictBatchSize}, {"max_predict_rows", &r.MaxPredictRows},
		{"max_read_rows", &r.MaxReadRows}, {"max_retries", &r.MaxRetries},
	}
	for _, it := range ints {
		n, err := strconv.Atoi(strings.TrimSpace(get(it.key)))
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %q is not a whole number", it.key, httpjson.Truncate(get(it.key), maxEcho)))
		case n < 1:
			errs = append(errs, fmt.Errorf("%s: must be at least 1, got %d", it.key, n))
		default:
			*it.dst = n
		}
	}
	if r.MinHistory > 0 && r.MaxTrainRows > 0 && r.MinHistory > r.MaxTrainRows {
		errs = append(errs, fmt.Errorf("min_history (%d) must not exceed max_train_rows (%d): the model would never be called", r.MinHistory, r.MaxTrainRows))
	}
	if r.MaxRetries > MaxRetries {
		errs = append(errs, fmt.Errorf("max_retries: at most %d, got %d (attempts per gateway call and per write; a batch that still fails is left to the next run, or to 'regressd dlq retry')", MaxRetries, r.MaxRetries))
	}
	run.Args = r
	errs = resolveRunArgs(args, &run, errs)
	errs = resolveQuantileArgs(args, &run, errs)
	errs = resolveGroupBy(args, &run, errs)
	return run, errors.Join(errs...)
}

// MaxFeatureFields is the most feature fields a run may name: a task's
// description, feature names included, travels in a NATS header.
const MaxFeatureFields = 256

// checkValues refuses argument values PostgreSQL cannot take: invalid
// UTF-8 or a NUL byte (SQLSTATE 22021 once bound). A task would fail on
// them in the database; refused here, the caller learns why at once.
func checkValues(args map[string]string) error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(args)) {
		if v := args[k]; !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
			errs = append(errs, fmt.Errorf("argument %q holds a NUL byte or invalid UTF-8, which PostgreSQL cannot take: send valid UTF-8 text", k))
		}
	}
	return errors.Join(errs...)
}

func parseFeatures(s, target string, errs []error) ([]string, []error) {
	seen := map[string]bool{}
	var out []string
	names := strings.Fields(s)
	if strings.HasPrefix(strings.TrimSpace(s), "[") {
		// A JSON list (FeatureList): names may hold white space.
		if err := json.Unmarshal([]byte(s), &names); err != nil {
			return nil, append(errs, fmt.Errorf("feature_fields: %q is neither space-separated names nor a JSON list of strings", httpjson.Truncate(s, maxEcho)))
		}
	}
	for _, f := range names {
		if seen[f] {
			continue // de-duplicated, order kept
		}
		seen[f] = true
		switch {
		case strings.TrimSpace(f) == "":
			errs = append(errs, errors.New("feature_fields: an empty name"))
		case f == target:
			errs = append(errs, fmt.Errorf("feature_fields contains the target %q: a column cannot predict itself", f))
		case f == "time":
			errs = append(errs, errors.New(`feature_fields contains "time": the timestamp is not a feature`))
		case f == schemas.ColTarget:
			errs = append(errs, fmt.Errorf("feature %q: reserved name", f))
		default:
			if err := checkIdent("feature", f); err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, f)
		}
	}
	if len(out) > MaxFeatureFields {
		errs = append(errs, fmt.Errorf("feature_fields: %d names, over the limit of %d", len(out), MaxFeatureFields))
	}
	return out, errs
}

// ParseTags parses "k:v k2:v2". A tag holding a space, tab, comma, ':' (in a
// key) or a '%' before two hex digits writes them percent-escaped:
// "city:New%20York".
func ParseTags(s string) (map[string]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	var errs []error
	for _, kv := range strings.Fields(s) {
		k, v, ok := strings.Cut(kv, ":")
		k, v = unescapeTag(k), unescapeTag(v)
		switch {
		case !ok || k == "":
			errs = append(errs, fmt.Errorf("tags: %q is not tag_key:tag_value", httpjson.Truncate(kv, maxEcho)))
		case out[k] != "":
			errs = append(errs, fmt.Errorf("tags: key %q given twice", httpjson.Truncate(k, maxEcho)))
		default:
			out[k] = v
		}
	}
	return out, errors.Join(errs...)
}

// unescapeTag decodes the %XX escapes of s; a '%' not followed by two hex
// digits is itself ("load:50%" reads as it always did).
func unescapeTag(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1", "yes", "on":
		return true, nil
	case "false", "0", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("%q is not true or false", httpjson.Truncate(s, maxEcho))
}

// checkIdent refuses names PostgreSQL cannot hold; anything else is quoted
// wherever it is used, so quotes, semicolons and unicode are safe.
func checkIdent(what, name string) error {
	switch {
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("%s %q contains a NUL byte", what, httpjson.Truncate(name, maxEcho))
	case len(name) > 63:
		return fmt.Errorf("%s %q is longer than PostgreSQL's 63-byte identifier limit", what, httpjson.Truncate(name, maxEcho))
	}
	return nil
}

// retiredModels are slugs the vendor retired, refused by name as the
// plugin refuses them rather than letting the gateway answer 404.
var retiredModels = map[string]string{
	"synthefy/nori": "is retired and no longer routes: use a current slug such as synthefy/nori-30m",
}

// checkModelSlug checks the shape <vendor>/<name>.
func checkModelSlug(s string) error {
	vendor, name, ok := strings.Cut(s, "/")
	if !ok || vendor == "" || name == "" || strings.ContainsAny(s, " \t,") || strings.Count(s, "/") != 1 {
		return fmt.Errorf("model %q is not a slug of the form <vendor>/<model> (run 'regressd models' for the built-in ones)", httpjson.Truncate(s, maxEcho))
	}
	if len(s) > maxModelSlug {
		return fmt.Errorf("model %q is %d bytes, over the limit of %d", httpjson.Truncate(s, maxEcho), len(s), maxModelSlug)
	}
	if why, ok := retiredModels[s]; ok {
		return fmt.Errorf("model %q %s", httpjson.Truncate(s, maxEcho), why)
	}
	return nil
}

// maxModelSlug is the longest model slug taken: it travels in every
// batch's header and every prediction row.
const maxModelSlug = 200
