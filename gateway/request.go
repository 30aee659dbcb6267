package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/regressd/regressd/gpu"
)

// predictRequest is a decoded POST /predict body. decodeBody checks its
// syntax, field names and matrix shapes; the fields' values are checked by
// serve (model, task, output options, policies).
type predictRequest struct {
	Model, Task, OutputType string
	// Quantiles is the quantiles field, nil when absent or null.
	Quantiles []float64
	// Policy is the raw memory_policy, nil when absent or null.
	Policy json.RawMessage
	// Large-context fields as raw JSON, nil when absent.
	LargePolicy, LargeThreshold, LargeSeed json.RawMessage

	X  [][]float64 // NaN = missing
	Y  []float64
	Xq [][]float64 // NaN = missing
	// NonNull counts the non-null values in X, Y and Xq (input tokens).
	NonNull int64
}

// requestFields are the body's fields, as the official client spells them.
var requestFields = []string{
	"model", "task", "X_train", "y_train", "X_test", "memory_policy",
	"output_type", "quantiles",
	"large_context_policy", "large_context_threshold", "large_context_seed",
}

// maxSmallField bounds every field but the matrices, in bytes: a model name,
// a policy or a list of 99 levels is far smaller.
const maxSmallField = 64 << 10

// badRequest is a caller error: its message goes back verbatim with status.
type badRequest struct {
	status     int
	msg        string
	retryAfter int // seconds, for a Retry-After header; 0: none
	reason     refusal
}

func (e *badRequest) Error() string { return e.msg }

func invalid(format string, args ...any) error {
	return &badRequest{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// cellBudget bounds what one request may decode; take is called per row.
type cellBudget interface {
	// take reserves rows more rows of width columns holding cells more
	// cells of the matrix name, or returns the caller error to answer.
	take(name string, rows int64, width int, cells int64) error
}

// decodeBody streams a JSON body into a predictRequest: the matrices are
// parsed cell by cell as they arrive, so the body is never held whole, and
// budget is asked before each row is kept. Duplicate and unknown fields
// are errors naming them.
func decodeBody(r io.Reader, budget cellBudget) (*predictRequest, error) {
	s := newStream(r)
	c, err := s.peek()
	if err != nil {
		return nil, err
	}
	if c != '{' {
		kind := gpu.JSONKind([]byte{c})
		if c != '[' && c != '"' {
			// A scalar: is it JSON at all ("xyz", "nul")?
			raw, err := s.raw(4096, "the body's value")
			if err != nil {
				return nil, err
			}
			kind = gpu.JSONKind(raw)
		}
		return nil, invalid("the body must be a JSON object with model, X_train, y_train and X_test, got %s", kind)
	}
	s.next()
	req := &predictRequest{}
	seen := map[string]bool{}
	var unknown, dup []string
	more, err := s.empty('}')
	more = !more
	for ; err == nil && more; more, err = s.more('}') {
		key, err := s.key()
		if err != nil {
			return nil, err
		}
		if seen[key] {
			dup = append(dup, key)
		}
		seen[key] = true
		var n int64
		switch key {
		case "X_train":
			req.X, n, err = parseMatrix(s, "X_train", budget)
		case "X_test":
			req.Xq, n, err = parseMatrix(s, "X_test", budget)
		case "y_train":
			req.Y, n, err = parseVector(s, "y_train", budget)
		default:
			if !slices.Contains(requestFields, key) {
				unknown = append(unknown, key)
				_, err = s.raw(-1, key)
				break
			}
			var raw json.RawMessage
			if raw, err = s.raw(maxSmallField, key); err == nil {
				err = req.small(raw, key)
			}
		}
		if err != nil {
			return nil, err
		}
		req.NonNull += n
	}
	if err != nil {
		return nil, err
	}
	if end, err := s.atEnd(); err != nil {
		return nil, err
	} else if !end {
		return nil, invalid("the body has more after its JSON object: send one object")
	}
	if len(unknown) > 0 {
		return nil, unknownFields(unknown)
	}
	if len(dup) > 0 {
		return nil, invalid("field(s) %s appear more than once: send each field once", quoteList(dup))
	}
	return req, req.checkShapes()
}

// small reads one of the small fields, raw and already valid JSON, into req.
func (req *predictRequest) small(raw json.RawMessage, key string) error {
	if len(raw) > maxSmallField {
		return invalid("%s is %d bytes, over the %d this field may take", key, len(raw), maxSmallField)
	}
	if err := noDuplicateKeys(raw, key); err != nil {
		return err
	}
	null := isNull(raw)
	str := func() (string, error) {
		if null {
			return "", nil
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", invalid("%s must be a string, got %s", key, gpu.JSONKind(raw))
		}
		return s, nil
	}
	var err error
	switch key {
	case "model":
		req.Model, err = str()
	case "task":
		req.Task, err = str()
	case "output_type":
		req.OutputType, err = str()
	case "quantiles":
		if null {
			return nil
		}
		var levels []json.RawMessage
		if e := json.Unmarshal(raw, &levels); e != nil {
			return invalid("quantiles must be an array of numbers in (0, 1), got %s", gpu.JSONKind(raw))
		}
		// json.Number would take "0.5", a string, as a number.
		var bad []string
		for i, l := range levels {
			if k := gpu.JSONKind(l); k != "a number" {
				bad = append(bad, fmt.Sprintf("element %d is %s (%s)", i, k, truncate(string(l), 32)))
			}
		}
		if bad != nil {
			return invalid("quantiles must be an array of numbers in (0, 1): %s", strings.Join(bad, "; "))
		}
		req.Quantiles = make([]float64, len(levels))
		for i, l := range levels {
			var e error
			if req.Quantiles[i], e = strconv.ParseFloat(string(l), 64); e != nil {
				req.Quantiles[i] = math.NaN() // named by the level check
			}
		}
	case "memory_policy":
		if !null {
			req.Policy = raw
		}
	case "large_context_policy":
		if !null {
			req.LargePolicy = raw
		}
	case "large_context_threshold":
		if !null {
			req.LargeThreshold = raw
		}
	case "large_context_seed":
		if !null {
			req.LargeSeed = raw
		}
	}
	return err
}

// checkShapes checks the matrices against each other.
func (req *predictRequest) checkShapes() error {
	switch {
	case req.X == nil:
		return invalid("X_train is required: an array of rows, each an array of numbers")
	case req.Y == nil:
		return invalid("y_train is required: an array of numbers, one per X_train row")
	case req.Xq == nil:
		return invalid("X_test is required: an array of rows, each an array of numbers")
	case len(req.X) == 0:
		return invalid("X_train is empty: send at least one context row")
	case len(req.Xq) == 0:
		return invalid("X_test is empty: send at least one row to predict")
	case len(req.Y) != len(req.X):
		return invalid("y_train has %d values but X_train has %d rows: send one target per context row", len(req.Y), len(req.X))
	}
	if w, wq := len(req.X[0]), len(req.Xq[0]); w != wq {
		return invalid("X_test rows have %d features but X_train rows have %d: both must have the same columns", wq, w)
	}
	return nil
}

// unknownFields names each unknown field, with the known one it resembles.
func unknownFields(unknown []string) error {
	slices.Sort(unknown)
	var parts []string
	for _, k := range unknown {
		s := strconv.Quote(truncate(k, 64))
		for _, f := range requestFields {
			if strings.EqualFold(k, f) {
				s += fmt.Sprintf(" (did you mean %q?)", f)
			}
		}
		parts = append(parts, s)
	}
	return invalid("unknown field(s) %s; the body takes %s", strings.Join(parts, ", "), strings.Join(requestFields, ", "))
}

// parseMatrix reads an array of equally long, non-empty rows of numbers or
// nulls (NaN), into rows backed by 64 KiB slabs. It returns an empty,
// non-nil matrix for [] and nil for null.
func parseMatrix(s *stream, name string, budget cellBudget) ([][]float64, int64, error) {
	ok, null, got, err := s.open()
	switch {
	case err != nil:
		return nil, 0, err
	case null:
		return nil, 0, nil
	case !ok:
		return nil, 0, invalid("%s must be an array of rows, got %s", name, got)
	}
	rows := [][]float64{}
	var nonNull int64
	width := -1
	var slab []float64
	end, err := s.empty(']')
	for i := 0; err == nil && !end; i++ {
		ok, null, got, err := s.open()
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			if null {
				got = "null"
			}
			return nil, 0, invalid("%s row %d must be an array of numbers, got %s", name, i, got)
		}
		if width > 0 && len(slab)+width > cap(slab) {
			slab = make([]float64, 0, width*max(1, 8192/width)) // 64 KiB slabs
		}
		start := len(slab)
		closed, err := s.empty(']')
		for j := 0; err == nil && !closed; j++ {
			v, isNull, err := s.cell()
			if err != nil {
				var br *badRequest
				if errors.As(err, &br) {
					return nil, 0, err
				}
				return nil, 0, invalid("%s row %d, column %d: %v", name, i, j, err)
			}
			if !isNull {
				nonNull++
			}
			slab = append(slab, v)
			var more bool
			if more, err = s.more(']'); err != nil {
				return nil, 0, err
			}
			closed = !more
		}
		if err != nil {
			return nil, 0, err
		}
		row := slab[start:len(slab):len(slab)]
		switch {
		case len(row) == 0:
			return nil, 0, invalid("%s row %d is empty: every row needs at least one feature", name, i)
		case width < 0:
			width = len(row)
		case len(row) != width:
			return nil, 0, invalid("%s row %d has %d values but row 0 has %d: every row must have the same number of features", name, i, len(row), width)
		}
		if err := budget.take(name, 1, len(row), int64(len(row))); err != nil {
			return nil, 0, err
		}
		rows = append(rows, row)
		var more bool
		if more, err = s.more(']'); err != nil {
			return nil, 0, err
		}
		end = !more
	}
	if err != nil {
		return nil, 0, err
	}
	return rows, nonNull, nil
}

// parseVector reads the targets: numbers only, since every context row
// needs one.
func parseVector(s *stream, name string, budget cellBudget) ([]float64, int64, error) {
	ok, null, got, err := s.open()
	switch {
	case err != nil:
		return nil, 0, err
	case null:
		return nil, 0, nil
	case !ok:
		return nil, 0, invalid("%s must be an array of numbers, got %s", name, got)
	}
	out := []float64{}
	end, err := s.empty(']')
	for i := 0; err == nil && !end; i++ {
		v, isNull, err := s.cell()
		if err != nil {
			var br *badRequest
			if errors.As(err, &br) {
				return nil, 0, err
			}
			return nil, 0, invalid("%s[%d]: %v", name, i, err)
		}
		if isNull {
			return nil, 0, invalid("%s[%d] is null: every context row needs a target (leave rows without one out of X_train)", name, i)
		}
		if i%1024 == 1023 { // cells are reserved 1,024 at a time
			if err := budget.take(name, 0, 0, 1024); err != nil {
				return nil, 0, err
			}
		}
		out = append(out, v)
		var more bool
		if more, err = s.more(']'); err != nil {
			return nil, 0, err
		}
		end = !more
	}
	if err != nil {
		return nil, 0, err
	}
	if err := budget.take(name, 0, 0, int64(len(out)%1024)); err != nil {
		return nil, 0, err
	}
	return out, int64(len(out)), nil
}

// noDuplicateKeys refuses an object anywhere in raw that repeats a key:
// encoding/json would silently keep the last.
func noDuplicateKeys(raw json.RawMessage, field string) error {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	type frame struct {
		obj  bool
		keys map[string]bool
		key  bool // the next token is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return jsonProblem(err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.key {
			if k, ok := tok.(string); ok {
				if top.keys[k] {
					return invalid("%s has the key %q more than once: send each key once", field, truncate(k, 64))
				}
				top.keys[k] = true
				top.key = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{obj: true, keys: map[string]bool{}, key: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].key = true // a value ended
		}
	}
}

// jsonProblem turns a decoding error into a caller message, pointing out
// Python's NaN/Infinity, which are not JSON.
func jsonProblem(err error) error {
	var br *badRequest
	if errors.As(err, &br) {
		return err
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return &badRequest{status: http.StatusRequestEntityTooLarge, reason: refusedBodyTooLarge, msg: fmt.Sprintf(
			"the body is over this gateway's limit of %d bytes; send fewer context or query rows per request", mbe.Limit)}
	}
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		msg := syn.Error()
		for c, tok := range map[string]string{"'N'": "NaN", "'I'": "Infinity"} {
			if strings.Contains(msg, "invalid character "+c) {
				return invalid("the body has %s near byte %d: non-finite numbers are not allowed; send null for a missing feature value", tok, syn.Offset)
			}
		}
		return invalid("the body is not valid JSON: %v (at byte %d)", syn, syn.Offset)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return invalid("the body is not valid JSON: it ends before the object does")
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return &badRequest{status: http.StatusRequestTimeout, reason: refusedSlowBody, msg: fmt.Sprintf(
			"the body did not arrive within %v of the request's turn; send it faster, or a smaller one", BodyReadTimeout)}
	}
	return invalid("could not read the body: %v", err)
}

func isNull(raw []byte) bool { return strings.TrimSpace(string(raw)) == "null" }

// truncate bounds echoed input (a 1 MB name must not come back whole).
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(truncate(s, 64))
	}
	return strings.Join(q, ", ")
}
