package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// predictRequest is a decoded, validated POST /predict body.
type predictRequest struct {
	Model string
	// Policy is the raw memory_policy, nil when absent or null.
	Policy json.RawMessage
	X      [][]float64 // NaN = missing
	Y      []float64
	Xq     [][]float64 // NaN = missing
	// NonNull counts the non-null values in X, Y and Xq (input tokens).
	NonNull int64
}

// requestFields are the body's fields, as the hosted service spells them.
var requestFields = []string{"model", "task", "X_train", "y_train", "X_test", "memory_policy"}

// badRequest is a caller error: its message goes back verbatim with status.
type badRequest struct {
	status     int
	msg        string
	retryAfter int // seconds, for a Retry-After header; 0: none
}

func (e *badRequest) Error() string { return e.msg }

func invalid(format string, args ...any) error {
	return &badRequest{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// decodeEnvelope reads the body's top level: every field but the matrices
// is checked here, so a bad model or policy is refused before the matrices
// are parsed.
func decodeEnvelope(body []byte) (map[string]json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, jsonProblem(body, err)
	}
	if fields == nil {
		return nil, invalid("the body must be a JSON object with model, X_train, y_train and X_test")
	}
	var unknown []string
	for k := range fields {
		if !slices.Contains(requestFields, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		var parts []string
		for _, k := range unknown {
			s := fmt.Sprintf("%q", k)
			for _, f := range requestFields {
				if strings.EqualFold(k, f) {
					s += fmt.Sprintf(" (did you mean %q?)", f)
				}
			}
			parts = append(parts, s)
		}
		return nil, invalid("unknown field(s) %s; the body takes %s", strings.Join(parts, ", "), strings.Join(requestFields, ", "))
	}
	return fields, nil
}

// jsonProblem turns a JSON syntax or type error into a caller message,
// pointing out Python's NaN/Infinity, which are not JSON.
func jsonProblem(body []byte, err error) error {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		at := max(int(syn.Offset)-1, 0)
		rest := body[at:]
		for _, tok := range []string{"NaN", "Infinity", "-Infinity"} {
			if bytes.HasPrefix(rest, []byte(tok)) || (at > 0 && bytes.HasPrefix(body[at-1:], []byte(tok))) {
				return invalid("the body has %s at byte %d: non-finite numbers are not allowed; send null for a missing feature value", tok, at)
			}
		}
		return invalid("the body is not valid JSON: %v (at byte %d)", syn, syn.Offset)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		return invalid("the body must be a JSON object with model, X_train, y_train and X_test, got %s", typ.Value)
	}
	return invalid("the body is not valid JSON: %v", err)
}

// stringField reads an optional string field; absent and null give "".
func stringField(fields map[string]json.RawMessage, name string) (string, error) {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", invalid("%s must be a string, got %s", name, kind(raw))
	}
	return s, nil
}

// decodeData parses and checks X_train, y_train and X_test.
func decodeData(fields map[string]json.RawMessage, r *predictRequest) error {
	var err error
	var n int64
	if r.X, n, err = parseMatrix("X_train", fields["X_train"]); err != nil {
		return err
	}
	r.NonNull += n
	if r.Y, n, err = parseVector("y_train", fields["y_train"]); err != nil {
		return err
	}
	r.NonNull += n
	if r.Xq, n, err = parseMatrix("X_test", fields["X_test"]); err != nil {
		return err
	}
	r.NonNull += n
	if len(r.Y) != len(r.X) {
		return invalid("y_train has %d values but X_train has %d rows: send one target per context row", len(r.Y), len(r.X))
	}
	if w, wq := len(r.X[0]), len(r.Xq[0]); w != wq {
		return invalid("X_test rows have %d features but X_train rows have %d: both must have the same columns", wq, w)
	}
	return nil
}

// parseMatrix reads a non-empty array of equally long, non-empty rows of
// numbers or nulls (NaN). It returns the matrix and its non-null count.
func parseMatrix(name string, raw json.RawMessage) ([][]float64, int64, error) {
	if raw == nil || isNull(raw) {
		return nil, 0, invalid("%s is required: an array of rows, each an array of numbers", name)
	}
	s := scanner{b: raw}
	if !s.open('[') {
		return nil, 0, invalid("%s must be an array of rows, got %s", name, kind(raw))
	}
	var rows [][]float64
	var nonNull int64
	width := -1
	for i := 0; s.more(']'); i++ {
		if !s.open('[') {
			return nil, 0, invalid("%s row %d must be an array of numbers, got %s", name, i, kind(s.rest()))
		}
		row := make([]float64, 0, max(width, 0))
		for j := 0; s.more(']'); j++ {
			v, null, err := s.number()
			if err != nil {
				return nil, 0, invalid("%s row %d, column %d: %v", name, i, j, err)
			}
			if !null {
				nonNull++
			}
			row = append(row, v)
		}
		switch {
		case len(row) == 0:
			return nil, 0, invalid("%s row %d is empty: every row needs at least one feature", name, i)
		case width < 0:
			width = len(row)
		case len(row) != width:
			return nil, 0, invalid("%s row %d has %d values but row 0 has %d: every row must have the same number of features", name, i, len(row), width)
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		what := "context row"
		if name == "X_test" {
			what = "row to predict"
		}
		return nil, 0, invalid("%s is empty: send at least one %s", name, what)
	}
	return rows, nonNull, nil
}

// parseVector reads the targets: numbers only, since every context row
// needs one.
func parseVector(name string, raw json.RawMessage) ([]float64, int64, error) {
	if raw == nil || isNull(raw) {
		return nil, 0, invalid("%s is required: an array of numbers, one per X_train row", name)
	}
	s := scanner{b: raw}
	if !s.open('[') {
		return nil, 0, invalid("%s must be an array of numbers, got %s", name, kind(raw))
	}
	var out []float64
	for i := 0; s.more(']'); i++ {
		v, null, err := s.number()
		if err != nil {
			return nil, 0, invalid("%s[%d]: %v", name, i, err)
		}
		if null {
			return nil, 0, invalid("%s[%d] is null: every context row needs a target (leave rows without one out of X_train)", name, i)
		}
		out = append(out, v)
	}
	return out, int64(len(out)), nil
}

// scanner walks JSON arrays that encoding/json has already checked for
// syntax, so it only has to tell element kinds apart. It is much cheaper
// than decoding cells through reflection, and its errors know the cell.
type scanner struct {
	b []byte
	i int
	// first is true right after an opening bracket, before the first element.
	first bool
}

func (s *scanner) skipSpace() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\n' || s.b[s.i] == '\t' || s.b[s.i] == '\r') {
		s.i++
	}
}

func (s *scanner) rest() []byte { s.skipSpace(); return s.b[s.i:] }

// open consumes an opening bracket c.
func (s *scanner) open(c byte) bool {
	s.skipSpace()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		s.first = true
		return true
	}
	return false
}

// more reports whether another element follows in the array being read,
// consuming the separating comma or the closing bracket.
func (s *scanner) more(closing byte) bool {
	s.skipSpace()
	if s.i < len(s.b) && s.b[s.i] == closing {
		s.i++
		s.first = false
		return false
	}
	if !s.first && s.i < len(s.b) && s.b[s.i] == ',' {
		s.i++
	}
	s.first = false
	return s.i < len(s.b)
}

// number reads a number or null (NaN, null=true). Anything else, and numbers
// too large for float64, are errors.
func (s *scanner) number() (float64, bool, error) {
	s.skipSpace()
	start := s.i
	if bytes.HasPrefix(s.b[s.i:], []byte("null")) {
		s.i += 4
		return math.NaN(), true, nil
	}
	for s.i < len(s.b) && strings.IndexByte("+-0123456789.eE", s.b[s.i]) >= 0 {
		s.i++
	}
	if s.i == start {
		v := s.b[start:]
		s.skipValue()
		return 0, false, fmt.Errorf("want a number or null, got %s", kind(v))
	}
	v, err := strconv.ParseFloat(string(s.b[start:s.i]), 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, false, fmt.Errorf("%s is not a finite number", s.b[start:s.i])
	}
	return v, false, nil
}

// skipValue steps over one JSON value (used only on the error path).
func (s *scanner) skipValue() {
	depth := 0
	inStr := false
	for ; s.i < len(s.b); s.i++ {
		c := s.b[s.i]
		switch {
		case inStr:
			if c == '\\' {
				s.i++
			} else if c == '"' {
				inStr = false
				if depth == 0 {
					s.i++
					return
				}
			}
		case c == '"':
			inStr = true
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			if depth == 0 {
				return
			}
			depth--
			if depth == 0 {
				s.i++
				return
			}
		case c == ',' && depth == 0:
			return
		}
	}
}

func isNull(raw []byte) bool { return string(bytes.TrimSpace(raw)) == "null" }

// kind names the JSON type at the start of v for messages.
func kind(v []byte) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}
