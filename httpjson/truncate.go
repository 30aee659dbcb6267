package httpjson

import "unicode/utf8"

// Truncate cuts s to at most n bytes on a rune boundary, marking the cut,
// so that input echoed into an answer or a log line stays short.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
