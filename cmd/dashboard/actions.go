package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/rmq-go/rmq/topic"
)

// Actions are one endpoint, POST action, with the fields op, topic, id
// (repeated), return and csrf. Every action is confirmed: a request
// without confirm=yes answers with a page that restates it and asks, and
// only the form of that page carries confirm=yes. The request has passed
// the read-only and CSRF checks (ServeHTTP) before it gets here.

// op is one kind of action.
type op struct {
	needIDs bool
	pause   bool // offered only when the library can pause
	// ask is the confirmation question, done the report of the result.
	ask  func(t topic.Topic, ids []string) string
	run  func(h *handler, ctx context.Context, t topic.Topic, ids []string) (string, error)
	verb string // the confirm button
}

var ops = map[string]op{
	"requeue": {needIDs: true, verb: "Requeue",
		ask: func(t topic.Topic, ids []string) string {
			return fmt.Sprintf("Requeue %s of %s? They become due now, with no failed attempts.", count(len(ids), "dead message"), t.Name())
		},
		run: func(h *handler, ctx context.Context, t topic.Topic, ids []string) (string, error) {
			n, err := h.insp.Requeue(ctx, t, ids...)
			return fmt.Sprintf("Requeued %s.", count(n, "message")), err
		}},
	"delete": {needIDs: true, verb: "Delete",
		ask: func(t topic.Topic, ids []string) string {
			return fmt.Sprintf("Delete %s of %s for good?", count(len(ids), "dead message"), t.Name())
		},
		run: func(h *handler, ctx context.Context, t topic.Topic, ids []string) (string, error) {
			n, err := h.insp.DeleteDead(ctx, t, ids...)
			return fmt.Sprintf("Deleted %s.", count(n, "dead message")), err
		}},
	"requeue-all": {verb: "Requeue all",
		ask: func(t topic.Topic, _ []string) string {
			return fmt.Sprintf("Requeue every dead message of %s?", t.Name())
		},
		run: func(h *handler, ctx context.Context, t topic.Topic, _ []string) (string, error) {
			n, err := h.insp.RequeueAll(ctx, t)
			return fmt.Sprintf("Requeued %s.", count(n, "message")), err
		}},
	"delete-all": {verb: "Delete all",
		ask: func(t topic.Topic, _ []string) string {
			return fmt.Sprintf("Delete every dead message of %s for good?", t.Name())
		},
		run: func(h *handler, ctx context.Context, t topic.Topic, _ []string) (string, error) {
			n, err := h.insp.PurgeDead(ctx, t)
			return fmt.Sprintf("Deleted %s.", count(n, "dead message")), err
		}},
	"remove": {needIDs: true, verb: "Remove",
		ask: func(t topic.Topic, ids []string) string {
			return fmt.Sprintf("Remove %s from %s? It will not be delivered.", count(len(ids), "waiting message"), t.Name())
		},
		run: func(h *handler, ctx context.Context, t topic.Topic, ids []string) (string, error) {
			n := 0
			for _, id := range ids {
				ok, err := h.removeWaiting(ctx, t, id)
				if err != nil {
					return "", err
				}
				if ok {
					n++
				}
			}
			return fmt.Sprintf("Removed %s.", count(n, "waiting message")), nil
		}},
	"cancel": cancelOp, // life.go
	"pause": {pause: true, verb: "Pause",
		ask: func(t topic.Topic, _ []string) string {
			return fmt.Sprintf("Pause %s? No consumer takes its messages until it is resumed.", t.Name())
		},
		run: func(h *handler, ctx context.Context, t topic.Topic, _ []string) (string, error) {
			return "Paused " + t.Name() + ".", h.pause(ctx, t)
		}},
	"resume": {pause: true, verb: "Resume",
		ask: func(t topic.Topic, _ []string) string {
			return fmt.Sprintf("Resume %s?", t.Name())
		},
		run: func(h *handler, ctx context.Context, t topic.Topic, _ []string) (string, error) {
			return "Resumed " + t.Name() + ".", h.resume(ctx, t)
		}},
}

func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// maxActionIDs bounds the ids of one action (a page shows fewer).
const maxActionIDs = 10_000

type confirmData struct {
	Question, Verb, Op, Topic, Return string
	IDs                               []string
}

func (h *handler) action(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	f := r.PostForm
	if f.Get("op") == "settings" {
		h.saveSettings(w, r) // settings.go
		return
	}
	o, ok := ops[f.Get("op")]
	if !ok {
		o, ok = scheduleOps[f.Get("op")] // schedules.go
	}
	if !ok || (o.pause && !pauseAvailable) {
		h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("unknown action %q", f.Get("op")))
		return
	}
	t, err := h.lookup(ctx, f.Get("topic"))
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	var ids []string
	for _, id := range f["id"] {
		if id != "" {
			ids = append(ids, id)
		}
	}
	if o.needIDs && len(ids) == 0 {
		h.fail(w, r, http.StatusBadRequest, "no message selected")
		return
	}
	if len(ids) > maxActionIDs {
		h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("at most %d messages per action", maxActionIDs))
		return
	}
	ret := safeReturn(f.Get("return"), t.Name())
	if f.Get("confirm") != "yes" {
		h.render(w, r, http.StatusOK, "confirm", "Confirm", confirmData{
			Question: o.ask(t, ids), Verb: o.verb, Op: f.Get("op"), Topic: t.Name(), Return: ret, IDs: ids,
		})
		return
	}
	done, err := o.run(h, ctx, t, ids)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	h.log.InfoContext(ctx, "dashboard: action", "op", f.Get("op"), "topic", t.Name(), "ids", len(ids), "result", done)
	sep := "?"
	if strings.Contains(ret, "?") {
		sep = "&"
	}
	seeOther(w, ret+sep+h.flashQuery(done))
}

// safeReturn accepts only a page of the dashboard as the place to go back
// to, so the form field cannot redirect anywhere else; the default is the
// topic's page.
func safeReturn(ret, topicName string) string {
	u, err := url.Parse(ret)
	if err == nil && u.Scheme == "" && u.Host == "" && u.User == nil && !strings.HasPrefix(ret, "/") {
		switch u.Path {
		case "topic", "message", "./", "schedules", "settings":
			q := u.Query()
			q.Del("flash")
			q.Del(flashSigField)
			return u.Path + "?" + q.Encode()
		}
	}
	return "topic?" + url.Values{"name": {topicName}}.Encode()
}
