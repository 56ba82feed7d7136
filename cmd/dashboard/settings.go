package dashboard

// A topic's settings page: its flow-control limits (rmq.Limits) and its
// lifecycle (rmq.Lifecycle: retention of finished messages, event log),
// shown and edited through one form. The form posts to the action endpoint
// (op=settings), so it passes the same read-only, same-origin and CSRF
// checks as every other action; it is not confirmed on a page of its own,
// since the form already restates every value it stores.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// errBadSetting is a form value that is not a number or a duration.
var errBadSetting = errors.New("dashboard: invalid setting")

type settingsData struct {
	Topic  topic.Topic
	Limits rmq.Limits
	Life   rmq.Lifecycle
	Self   string
}

func settingsURL(name string) string {
	return "settings?" + url.Values{"topic": {name}}.Encode()
}

// settingsPage shows a topic's stored limits and lifecycle, as a form
// unless the dashboard is read-only.
func (h *handler) settingsPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	t, err := h.lookup(ctx, r.URL.Query().Get("topic"))
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	d := settingsData{Topic: t, Self: settingsURL(t.Name())}
	if d.Limits, d.Life, err = h.settingsOf(ctx, t); err != nil {
		h.failErr(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "settings", t.Name()+" settings", d)
}

func (h *handler) settingsOf(ctx context.Context, t topic.Topic) (rmq.Limits, rmq.Lifecycle, error) {
	l, err := h.insp.Limits(ctx, t)
	if err != nil {
		return rmq.Limits{}, rmq.Lifecycle{}, err
	}
	life, err := h.insp.Lifecycle(ctx, t)
	return l, life, err
}

// saveSettings stores the settings form of a topic: its limits, then its
// lifecycle, each only when it changed (a lifecycle write tells the
// topic's consumers; an unchanged one need not). Both are read from the
// form before anything is written, and the library checks their bounds
// before it writes, so a bad value stores nothing.
func (h *handler) saveSettings(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	f := r.PostForm
	t, err := h.lookup(ctx, f.Get("topic"))
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	lim, life, err := parseSettings(f)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	oldLim, oldLife, err := h.settingsOf(ctx, t)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	var changed []string
	if lim != oldLim {
		if err := h.insp.SetLimits(ctx, t, lim); err != nil {
			h.failErr(w, r, err)
			return
		}
		changed = append(changed, "limits "+orNone(lim.String()))
	}
	if life != oldLife {
		if err := h.insp.SetLifecycle(ctx, t, life); err != nil {
			h.failErr(w, r, err)
			return
		}
		changed = append(changed, fmt.Sprintf("retention %s, event log %d", roundDuration(life.Retention), life.Events))
	}
	done := "Nothing changed."
	if len(changed) > 0 {
		done = "Stored " + strings.Join(changed, "; ") + "."
	}
	h.log.InfoContext(ctx, "dashboard: action", "op", "settings", "topic", t.Name(), "result", done)
	seeOther(w, settingsURL(t.Name())+"&"+h.flashQuery(done))
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// parseSettings reads the settings form. An empty field is 0 (no limit,
// no retention, no log); a rate without its period takes one second.
func parseSettings(f url.Values) (rmq.Limits, rmq.Lifecycle, error) {
	var (
		l    rmq.Limits
		life rmq.Lifecycle
		errs []error
	)
	num := func(k string) int {
		v := strings.TrimSpace(f.Get(k))
		if v == "" {
			return 0
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%w: %s %q: want a whole number, 0 or more", errBadSetting, k, v))
		}
		return n
	}
	dur := func(k string, def time.Duration) time.Duration {
		v := strings.TrimSpace(f.Get(k))
		if v == "" || v == "0" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("%w: %s %q: want a duration such as 1s, 5m or 72h", errBadSetting, k, v))
		}
		return d
	}
	l.Rate, l.Concurrency = num("rate"), num("conc")
	l.GroupRate, l.GroupConcurrency = num("grate"), num("gconc")
	if l.Rate > 0 {
		l.RatePer = dur("rate_per", time.Second)
	}
	if l.GroupRate > 0 {
		l.GroupRatePer = dur("grate_per", time.Second)
	}
	life.Retention, life.Events = dur("retention", 0), num("events")
	return l, life, errors.Join(errs...)
}
