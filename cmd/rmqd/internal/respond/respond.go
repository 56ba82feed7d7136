package respond

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	pathpkg "path"
	"strings"
	"time"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/ids"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
)

const contentTypeJSON = "application/json; charset=utf-8"

// JSONContentType is the header value, shared by every answer: net/http
// copies the header before writing it and never changes the slice.
var JSONContentType = []string{contentTypeJSON}

// WriteJSON writes v as compact JSON, the form of every API answer.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Only our own types are written; none of them fails to encode.
		status, body = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	WriteRawJSON(w, status, body)
}

// WriteRawJSON writes body, already JSON.
func WriteRawJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header()[HeaderContentType] = JSONContentType
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// WritePretty writes v indented by four spaces, as lmstfy's admin answers
// for tokens, pools and the version are (clients must not depend on it).
func WritePretty(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "    ")
	if err := enc.Encode(v); err != nil {
		WriteJSON(w, http.StatusInternalServerError, errorBody{"internal error"})
		return
	}
	w.Header()[HeaderContentType] = JSONContentType
	w.WriteHeader(status)
	_, _ = w.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

type errorBody struct {
	Error string `json:"error"`
}

type MsgBody struct {
	Msg string `json:"msg"`
}

// WriteError answers {"error": text}.
func WriteError(w http.ResponseWriter, status int, text string) {
	WriteJSON(w, status, errorBody{text})
}

// WriteNoContent answers 204 with no body.
func WriteNoContent(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }

// StatusOf is the status written so far through w (0: nothing yet).
func StatusOf(w http.ResponseWriter) int {
	if r, ok := w.(*Recorder); ok {
		return r.Status
	}
	return 0
}

// RequestID returns the id the middleware gave the request answered
// through w. It travels with the writer rather than in the request's
// context: a context value would cost every request a copy of the request.
func RequestID(w http.ResponseWriter) string {
	if r, ok := w.(*Recorder); ok {
		return r.ID
	}
	return ""
}

// The canonical header names set on every answer, written into the header
// map directly (Header.Set canonicalizes its key on every call).
const (
	HeaderRequestID   = "X-Request-Id"
	HeaderContentType = "Content-Type"
)

// LogPath is r's path as log lines show it: a token in the path (the
// admin routes /token/{ns}/{token}…) is replaced by its fingerprint.
// The path is cleaned first, as the mux cleans it before routing (doubled
// slashes, "." and ".." segments, escaped dots), and "token" is matched in
// any case: a path that reaches the token routes only after a redirect,
// or does not reach them at all, still holds a token a client sent there.
// Every segment after the namespace is fingerprinted but the literal
// "limit" (a namespace with an escaped "/" shifts the token right). The
// query is never logged: it may hold a token too.
func LogPath(r *http.Request) string {
	raw := r.URL.EscapedPath()
	dec := raw
	if u, err := url.PathUnescape(raw); err == nil {
		dec = u
	}
	clean := pathpkg.Clean("/" + dec)
	first, rest, _ := strings.Cut(clean[1:], "/")
	if !strings.EqualFold(first, "token") {
		return r.URL.Path
	}
	segs := strings.Split(rest, "/")
	for i := 1; i < len(segs); i++ {
		if segs[i] == "limit" && i == len(segs)-1 {
			continue
		}
		pool, bare := names.SplitToken(segs[i])
		fp := ids.Fingerprint(bare)
		if strings.Contains(segs[i], ":") {
			fp = pool + ":" + fp
		}
		segs[i] = fp
	}
	return "/" + first + "/" + strings.Join(segs, "/")
}

// Recorder wraps every answer: it carries the request's id and start, and
// remembers the status and size of the answer for the access log, the
// metrics and the throttle's give-back (statusOf).
type Recorder struct {
	http.ResponseWriter
	ID     string
	Start  time.Time
	Status int
	Bytes  int64
}

func (r *Recorder) WriteHeader(code int) {
	if r.Status == 0 {
		r.Status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *Recorder) Write(p []byte) (int, error) {
	if r.Status == 0 {
		r.Status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(p)
	r.Bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection.
func (r *Recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Begin starts an answer: every answer carries a fresh X-Request-ID (a
// ULID, see newRequestID; an incoming one is ignored, as lmstfy does).
func Begin(w http.ResponseWriter) *Recorder {
	now := time.Now()
	rec := &Recorder{ResponseWriter: w, ID: ids.NewRequestID(now), Start: now}
	w.Header()[HeaderRequestID] = []string{rec.ID}
	return rec
}

// IsTooLarge reports whether err comes from an http.MaxBytesReader.
func IsTooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

// ReadBody reads a request body of at most limit bytes; a longer one is an
// *http.MaxBytesError (see isTooLarge). A body of known length is read
// into a buffer of its size.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if n := r.ContentLength; n >= 0 && n <= limit {
		// The body reader stops at the declared length.
		b := make([]byte, n)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	return io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
}
