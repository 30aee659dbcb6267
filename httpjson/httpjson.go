// Package httpjson answers HTTP requests with JSON: the one encoder that
// regressd's HTTP APIs (the admin API, the webhook, the gateway) share.
package httpjson

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

// Write answers v as JSON with status, indented by indent ("" for none):
// encoded whole before the header goes (a value that cannot be encoded
// answers 500), HTML left unescaped (messages quote <key>; this is not
// HTML), with its Content-Length.
func Write(w http.ResponseWriter, status int, v any, indent string) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":"internal error: response encoding","message":"internal error: response encoding","code":"internal"}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}
