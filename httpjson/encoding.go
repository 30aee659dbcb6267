package httpjson

import (
	"net/http"
	"strings"
)

// Coded returns a request's Content-Encoding when it is not identity
// ("gzip", say), else "". The servers read bodies as they arrive and
// decode no compression: a compressed body would otherwise be refused as
// malformed JSON or invalid UTF-8, which sends its sender looking in the
// wrong place. Callers answer 415 naming the coding.
func Coded(r *http.Request) string {
	for _, v := range r.Header.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return c
			}
		}
	}
	return ""
}

// CodedMessage is the 415 answer's message for a body in coding c.
func CodedMessage(c string) string {
	return "the body is sent with Content-Encoding: " + c + "; compressed bodies are not supported: send it uncompressed"
}
