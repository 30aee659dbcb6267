package gateway

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/regressd/regressd/gpu"
	"github.com/regressd/regressd/httpjson"
)

// stream reads one JSON document from a body, byte by byte through a
// buffer, so the matrices can be parsed cell by cell as they arrive without
// the body or a token per cell ever being held. It checks the grammar
// itself; small values (a model name, a policy) are cut out whole and
// handed to encoding/json.
type stream struct {
	r   *bufio.Reader
	off int64 // bytes consumed
	num []byte
}

func newStream(r io.Reader) *stream { return &stream{r: bufio.NewReaderSize(r, 64<<10)} }

// errSyntax is a grammar error at the current offset.
func (s *stream) errSyntax(want string, got byte) error {
	switch got {
	case 'N':
		return invalid("the body has NaN near byte %d: non-finite numbers are not allowed; send null for a missing feature value", s.off)
	case 'I':
		return invalid("the body has Infinity near byte %d: non-finite numbers are not allowed; send null for a missing feature value", s.off)
	}
	return invalid("the body is not valid JSON: want %s, got %q at byte %d", want, got, s.off)
}

// readErr maps a read failure: the body limit, a truncated body, a broken
// connection.
func (s *stream) readErr(err error) error {
	if errors.Is(err, io.EOF) {
		return invalid("the body is not valid JSON: it ends before the object does (at byte %d)", s.off)
	}
	return jsonProblem(err)
}

// peek skips whitespace and returns the next byte without consuming it.
func (s *stream) peek() (byte, error) {
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			return 0, s.readErr(err)
		}
		if c == ' ' || c == '\n' || c == '\t' || c == '\r' {
			s.off++
			continue
		}
		s.r.UnreadByte()
		return c, nil
	}
}

// next skips whitespace and consumes the next byte.
func (s *stream) next() (byte, error) {
	c, err := s.peek()
	if err == nil {
		s.r.ReadByte()
		s.off++
	}
	return c, err
}

// expect consumes c or fails naming what was wanted.
func (s *stream) expect(c byte, want string) error {
	got, err := s.next()
	if err != nil {
		return err
	}
	if got != c {
		return s.errSyntax(want, got)
	}
	return nil
}

// literal consumes the rest of a literal whose first byte was read.
func (s *stream) literal(rest string) error {
	for i := 0; i < len(rest); i++ {
		c, err := s.r.ReadByte()
		if err != nil {
			return s.readErr(err)
		}
		s.off++
		if c != rest[i] {
			return s.errSyntax("a JSON value", c)
		}
	}
	return nil
}

// atEnd reports whether only whitespace is left.
func (s *stream) atEnd() (bool, error) {
	_, err := s.peek()
	if err != nil {
		var br *badRequest
		if errors.As(err, &br) && br.status == 400 {
			return true, nil // the EOF message: nothing left
		}
		return false, err
	}
	return false, nil
}

// raw cuts out one whole JSON value of at most limit bytes and checks it
// with encoding/json; with a negative limit it steps over the value
// without keeping or checking it.
func (s *stream) raw(limit int, name string) (json.RawMessage, error) {
	first, err := s.peek()
	if err != nil {
		return nil, err
	}
	var out []byte
	depth, inStr, esc := 0, false, false
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			return nil, s.readErr(err)
		}
		s.off++
		if limit >= 0 {
			out = append(out, c)
			if len(out) > limit {
				return nil, invalid("%s is over the %d bytes this field may take", name, limit)
			}
		}
		switch {
		case inStr:
			if esc {
				esc = false
			} else if c == '\\' {
				esc = true
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
		}
		if inStr || depth > 0 {
			continue
		}
		// A scalar ends at a delimiter; a string or container at its close.
		if first == '"' || first == '[' || first == '{' {
			break
		}
		nc, err := s.r.Peek(1)
		if err != nil || isDelim(nc[0]) {
			break
		}
	}
	if limit < 0 {
		return nil, nil // skipped
	}
	if !json.Valid(out) {
		if first == 'N' || first == 'I' {
			return nil, s.errSyntax("", first)
		}
		return nil, invalid("the body is not valid JSON: %s is malformed (ending at byte %d)", name, s.off)
	}
	if err := httpjson.UTF8(out, s.off-int64(len(out))); err != nil {
		return nil, invalid("%v", err)
	}
	return out, nil
}

func isDelim(c byte) bool {
	return c == ',' || c == '}' || c == ']' || c == ' ' || c == '\n' || c == '\t' || c == '\r'
}

// key reads an object key and its colon.
func (s *stream) key() (string, error) {
	c, err := s.peek()
	if err != nil {
		return "", err
	}
	if c != '"' {
		s.next()
		return "", s.errSyntax("a field name in double quotes", c)
	}
	raw, err := s.raw(4096, "a field name")
	if err != nil {
		return "", err
	}
	var k string
	if err := json.Unmarshal(raw, &k); err != nil {
		return "", invalid("the body is not valid JSON: a field name is malformed at byte %d", s.off)
	}
	return k, s.expect(':', "':' after a field name")
}

// more reads the separator after an element: true after a comma, false at
// the closing bracket.
func (s *stream) more(closing byte) (bool, error) {
	c, err := s.next()
	if err != nil {
		return false, err
	}
	switch c {
	case ',':
		return true, nil
	case closing:
		return false, nil
	}
	return false, s.errSyntax(fmt.Sprintf("',' or '%c'", closing), c)
}

// open reads '[' (ok), or null (ok false, null true); anything else is
// reported as its kind.
func (s *stream) open() (ok, null bool, got string, err error) {
	c, err := s.peek()
	if err != nil {
		return false, false, "", err
	}
	switch c {
	case '[':
		s.next()
		return true, false, "", nil
	case 'n':
		s.next()
		return false, true, "", s.literal("ull")
	}
	return false, false, gpu.JSONKind([]byte{c}), nil
}

// empty consumes a closing bracket if it comes next.
func (s *stream) empty(closing byte) (bool, error) {
	c, err := s.peek()
	if err != nil || c != closing {
		return false, err
	}
	s.next()
	return true, nil
}

// cell reads a number or null (NaN, null=true). Anything else, and numbers
// too large for float64, are the caller's error.
func (s *stream) cell() (float64, bool, error) {
	c, err := s.peek()
	if err != nil {
		return 0, false, err
	}
	switch {
	case c == 'n':
		s.next()
		return math.NaN(), true, s.literal("ull")
	case c == '-' || c >= '0' && c <= '9':
	case c == 'N' || c == 'I':
		return 0, false, s.errSyntax("", c)
	default:
		return 0, false, fmt.Errorf("want a number or null, got %s", gpu.JSONKind([]byte{c}))
	}
	s.num = s.num[:0]
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return 0, false, s.readErr(err)
		}
		if !(c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') {
			s.r.UnreadByte()
			break
		}
		s.off++
		s.num = append(s.num, c)
	}
	if len(s.num) == 1 && s.num[0] == '-' {
		if c, err := s.r.Peek(1); err == nil && c[0] == 'I' {
			return 0, false, s.errSyntax("", 'I')
		}
	}
	if !jsonNumber(s.num) {
		return 0, false, invalid("the body is not valid JSON: %q is not a number (at byte %d)", truncate(string(s.num), 32), s.off)
	}
	v, err := strconv.ParseFloat(string(s.num), 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, false, fmt.Errorf("%s is not a finite number", truncate(string(s.num), 32))
	}
	return v, false, nil
}

// jsonNumber checks JSON's number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func jsonNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if digits() == 0 {
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(b)
}
