package dashboard

import (
	"context"
	"fmt"
	"net/http"

	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// The schedules page lists the schedules under the key prefix with their
// next and last firing; pause, resume, trigger and remove go through the
// one action endpoint (confirmed, read-only and CSRF checks included), with
// the schedule's topic as topic and its name as the one id.

// schedules returns the prefix's schedules.
func (h *handler) schedules() *rmq.Schedules {
	return rmq.NewSchedules(h.rdb, rmq.WithPrefix(h.cfg.keyPrefix))
}

type schedulesData struct {
	Schedules []rmq.ScheduleInfo
}

func (h *handler) schedulesPage(w http.ResponseWriter, r *http.Request) {
	if h.initErr != nil {
		h.failErr(w, r, h.initErr)
		return
	}
	list, err := h.schedules().List(r.Context())
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "schedules", "Schedules", schedulesData{Schedules: list})
}

// scheduleOp is an action on the one schedule named by ids[0].
func scheduleOp(verb, ask, done string, run func(s *rmq.Schedules, ctx context.Context, name string) (string, error)) op {
	return op{needIDs: true, verb: verb,
		ask: func(t topic.Topic, ids []string) string { return fmt.Sprintf(ask, ids[0], t.Name()) },
		run: func(h *handler, ctx context.Context, _ topic.Topic, ids []string) (string, error) {
			if len(ids) != 1 {
				return "", fmt.Errorf("one schedule at a time, not %d", len(ids))
			}
			extra, err := run(h.schedules(), ctx, ids[0])
			return fmt.Sprintf(done, ids[0]) + extra, err
		}}
}

// scheduleOps are the schedule actions, looked up after ops.
var scheduleOps = map[string]op{
	"schedule-pause": scheduleOp("Pause", "Pause schedule %s? Its next tick on %s is not sent; no tick fires until it is resumed.", "Paused schedule %s.",
		func(s *rmq.Schedules, ctx context.Context, name string) (string, error) {
			return "", s.Pause(ctx, name)
		}),
	"schedule-resume": scheduleOp("Resume", "Resume schedule %s on %s from its next tick? Ticks missed while paused are not fired.", "Resumed schedule %s.",
		func(s *rmq.Schedules, ctx context.Context, name string) (string, error) {
			return "", s.Resume(ctx, name)
		}),
	"schedule-trigger": scheduleOp("Trigger", "Fire schedule %s once now, one extra message on %s?", "Triggered schedule %s",
		func(s *rmq.Schedules, ctx context.Context, name string) (string, error) {
			id, err := s.Trigger(ctx, name)
			return ": message " + id + ".", err
		}),
	"schedule-remove": scheduleOp("Remove", "Remove schedule %s for good? Its pending tick on %s goes with it.", "Removed schedule %s.",
		func(s *rmq.Schedules, ctx context.Context, name string) (string, error) {
			return "", s.Remove(ctx, name)
		}),
}
