package main

import (
	"bytes"
	"encoding/json"
	"net/http"
)

const contentTypeJSON = "application/json; charset=utf-8"

// jsonContentType is the header value, shared by every answer: net/http
// copies the header before writing it and never changes the slice.
var jsonContentType = []string{contentTypeJSON}

// writeJSON writes v as compact JSON, the form of every API answer.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Only our own types are written; none of them fails to encode.
		status, body = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	writeRawJSON(w, status, body)
}

// writeRawJSON writes body, already JSON.
func writeRawJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header()[headerContentType] = jsonContentType
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writePretty writes v indented by four spaces, as lmstfy's admin answers
// for tokens, pools and the version are (clients must not depend on it).
func writePretty(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "    ")
	if err := enc.Encode(v); err != nil {
		writeJSON(w, http.StatusInternalServerError, errorBody{"internal error"})
		return
	}
	w.Header()[headerContentType] = jsonContentType
	w.WriteHeader(status)
	_, _ = w.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

type errorBody struct {
	Error string `json:"error"`
}

type msgBody struct {
	Msg string `json:"msg"`
}

// writeError answers {"error": text}.
func writeError(w http.ResponseWriter, status int, text string) {
	writeJSON(w, status, errorBody{text})
}

// writeInternal answers 500 {"error":"internal error","request_id":...}
// and logs the cause with the same request id, so an operator can find
// the one from the other. lmstfy's body has no request_id; the extra field
// is harmless to its clients.
func (s *service) writeInternal(w http.ResponseWriter, r *http.Request, err error) {
	id := requestID(w)
	s.log.ErrorContext(r.Context(), "rmqd: request failed", "request_id", id, "method", r.Method, "path", logPath(r), "err", err)
	writeJSON(w, http.StatusInternalServerError, struct {
		Error     string `json:"error"`
		RequestID string `json:"request_id"`
	}{"internal error", id})
}

// writeNoContent answers 204 with no body.
func writeNoContent(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }
