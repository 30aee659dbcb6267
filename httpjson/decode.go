package httpjson

// Checks every JSON request body gets before it is decoded: encoding/json
// replaces invalid UTF-8 with U+FFFD, so a value would silently become
// another value (a tag that matches nothing, a measurement that is not
// there).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// UTF8 returns nil when b is valid UTF-8, otherwise a 400-worthy error
// naming the offset (base + the index in b) of the first byte that is not.
func UTF8(b []byte, base int64) error {
	if utf8.Valid(b) {
		return nil
	}
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return fmt.Errorf("the body is not valid UTF-8: byte 0x%02x at offset %d is not part of a UTF-8 character; send text as UTF-8", b[i], base+int64(i))
		}
		i += n
	}
	return nil
}

// Syntax returns nil when b is one valid JSON value, otherwise a 400-worthy
// error naming the offset where it stops being JSON.
func Syntax(b []byte) error {
	if json.Valid(b) {
		return nil
	}
	var v any
	err := json.Unmarshal(b, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("the body is not valid JSON: %v (at offset %d)", se, se.Offset)
	}
	return fmt.Errorf("the body is not valid JSON: %v", err)
}

// Kind names the kind of the JSON value b holds, for "want an object, got
// …" messages: an array, a string, a number, a boolean, null.
func Kind(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
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
	}
	return "a number"
}
