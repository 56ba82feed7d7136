package dashboard

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// page is what every template receives: the layout's fields and the page's
// own data in D.
type page struct {
	Title          string
	CSRF           string
	ReadOnly       bool
	PauseAvailable bool
	ZooKeeper      bool // the ZooKeeper page exists
	NavLinks       []NavLink
	Flash          string
	Now            time.Time
	D              any
}

// render executes a page into a buffer first, so a template error becomes a
// clean 500 instead of half a page.
func (h *handler) render(w http.ResponseWriter, r *http.Request, status int, name, title string, d any) {
	p := page{
		Title:          title,
		ReadOnly:       h.cfg.readOnly,
		PauseAvailable: pauseAvailable,
		ZooKeeper:      h.cfg.zk != nil,
		NavLinks:       h.cfg.navLinks,
		Flash:          h.flashOf(r),
		Now:            time.Now(),
		D:              d,
	}
	if !h.cfg.readOnly {
		p.CSRF = h.csrfToken(w, r)
	}
	var buf bytes.Buffer
	if err := h.pages[name].Execute(&buf, p); err != nil {
		h.log.ErrorContext(r.Context(), "dashboard: render", "page", name, "err", err)
		http.Error(w, "dashboard: template error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail answers with an error page (or plain text for the JSON API).
func (h *handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if strings.HasPrefix(r.URL.Path, "/api/") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, "{\"error\":%q}\n", msg)
		return
	}
	h.render(w, r, status, "error", http.StatusText(status), msg)
}

// failErr maps an error of the library to a status and answers with it.
func (h *handler) failErr(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, rmq.ErrUnknownTopic), errors.Is(err, errMessageNotFound), errors.Is(err, rmq.ErrScheduleNotFound):
		status = http.StatusNotFound
	case errors.Is(err, rmq.ErrInvalidCursor), errors.Is(err, errBadCursor),
		errors.Is(err, topic.ErrInvalidName), errors.Is(err, rmq.ErrInvalidPageSize), errors.Is(err, rmq.ErrInvalidSchedule),
		errors.Is(err, rmq.ErrInvalidLimits), errors.Is(err, rmq.ErrInvalidLifecycle):
		status = http.StatusBadRequest
	}
	if status == http.StatusInternalServerError {
		h.log.ErrorContext(r.Context(), "dashboard: request failed", "path", r.URL.Path, "err", err)
	}
	h.fail(w, r, status, err.Error())
}

var funcs = template.FuncMap{
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04:05.000")
	},
	"rel":  relTime,
	"dur":  roundDuration,
	"pct":  func(n, top int64) int64 { return n * 100 / max(top, 1) },
	"join": strings.Join,
	"topicURL": func(name string) string {
		return "topic?" + url.Values{"name": {name}}.Encode()
	},
	"msgURL": func(t, id string) string {
		return "message?" + url.Values{"topic": {t}, "id": {id}}.Encode()
	},
}

// roundDuration keeps a duration readable: ms below a second, tenths of
// a second below a minute, seconds above.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond)
	case d < time.Minute:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

// relTime says how far t is from now, "in 3m12s" or "4.2s ago".
func relTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := time.Until(t)
	suffix, prefix := "", "in "
	if d < 0 {
		d, suffix, prefix = -d, " ago", ""
	}
	return prefix + roundDuration(d).String() + suffix
}
