package scheduler

import "unicode/utf8"

// maxEcho is the most of a caller's input an answer or a log line repeats.
const maxEcho = 200

// maxMessage is the longest error message an answer carries: every
// problem of a request is named, each with its input cut to maxEcho.
const maxMessage = 8 << 10

// truncate cuts s to at most n bytes on a rune boundary, marking the cut,
// so that input echoed into an answer or a log line stays short.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
