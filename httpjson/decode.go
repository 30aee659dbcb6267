package httpjson

// Checks every JSON request body gets before it is decoded: encoding/json
// replaces invalid UTF-8 with U+FFFD, so a value would silently become
// another value (a tag that matches nothing, a measurement that is not
// there).

import (
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
