package api

// api_schedules.go: the schedules of a queue (an RMQ extension).
// A schedule publishes one job on its queue at every tick of a cron spec,
// with the job id "<schedule>@<tick as Unix ms>"; every rmqd (every RMQ
// client of the pool) takes part in firing them, each tick once. The token
// is checked as for a publish to the queue. README.md documents the routes.

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/params"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/pull"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/quota"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/service"
)

// scheduleRoutes adds the schedule routes to the API router.
func (s *handlers) scheduleRoutes(q func(pattern string, o service.RouteOpts, h service.QueueHandler)) {
	// Every route that writes takes a unit of the token's write limit,
	// as a publish does: a trigger publishes a job, a set replaces one.
	w := service.RouteOpts{Throttle: service.ThrottleWrite}
	q("GET /api/{ns}/{q}/schedules", service.RouteOpts{}, s.listSchedules)
	q("PUT /api/{ns}/{q}/schedule/{name}", w, s.setSchedule)
	q("GET /api/{ns}/{q}/schedule/{name}", service.RouteOpts{}, s.getSchedule)
	q("DELETE /api/{ns}/{q}/schedule/{name}", w, s.removeSchedule)
	q("POST /api/{ns}/{q}/schedule/{name}/pause", w, s.pauseSchedule)
	q("POST /api/{ns}/{q}/schedule/{name}/resume", w, s.resumeSchedule)
	q("POST /api/{ns}/{q}/schedule/{name}/trigger", w, s.triggerSchedule)
}

// ScheduleJSON is a schedule as the routes answer it.
type ScheduleJSON struct {
	Name      string `json:"name"`
	Spec      string `json:"spec"`
	TZ        string `json:"tz"`
	CatchUp   int64  `json:"catch_up"` // seconds
	Priority  int64  `json:"priority,omitempty"`
	Tries     int    `json:"tries"`
	TTL       int64  `json:"ttl"` // seconds, from each tick; 0: never expires
	Paused    bool   `json:"paused"`
	Next      string `json:"next,omitempty"`       // RFC 3339; absent while paused
	LastFired string `json:"last_fired,omitempty"` // RFC 3339; absent before the first
	Fired     int64  `json:"fired"`
	Skipped   int64  `json:"skipped"`
	Data      string `json:"data"`
}

// schedulePrefix scopes schedule names to the queue: a schedule NAME of
// queue Q in namespace NS is the library's schedule "<topic of NS/Q>.NAME",
// so a namespace's token reaches its own schedules only.
func schedulePrefix(topicName string) string { return topicName + "." }

func toScheduleJSON(info rmq.ScheduleInfo, prefix string) ScheduleJSON {
	j := ScheduleJSON{
		Name: strings.TrimPrefix(info.Name, prefix), Spec: info.Spec, TZ: info.Location.String(),
		CatchUp: int64(info.CatchUp / time.Second), Priority: info.Priority, Tries: info.Message.MaxRetries + 1,
		TTL: int64(info.Message.TTL / time.Second), Paused: info.Paused, Fired: info.Fired, Skipped: info.Skipped,
		Data: string(info.Body),
	}
	if !info.Next.IsZero() {
		j.Next = info.Next.UTC().Format(time.RFC3339Nano)
	}
	if !info.LastFired.IsZero() {
		j.LastFired = info.LastFired.UTC().Format(time.RFC3339Nano)
	}
	return j
}

// scheduleName checks {name} ([-_A-Za-z0-9]+) and returns the library's
// name of it on t, or the 400 text.
func scheduleName(topicName, name string) (string, string) {
	full := schedulePrefix(topicName) + name
	if !names.ValidName(name) {
		return "", "schedule name contains forbidden characters"
	}
	if len(full) > 128 {
		return "", "schedule name too long"
	}
	return full, ""
}

// scheduleNames are the queue's topic name and the library's schedule
// name (no Redis read: a queue's schedules are found by name); ok is false
// when the answer was written.
func (s *handlers) scheduleNames(w http.ResponseWriter, qr *service.QueueReq) (string, string, bool) {
	tn := names.TopicName(qr.Ns, qr.Q)
	name, bad := scheduleName(tn, qr.ID)
	if bad != "" {
		respond.WriteError(w, http.StatusBadRequest, bad)
		return tn, "", false
	}
	return tn, name, true
}

// scheduleError answers an error of the schedules API.
func (s *handlers) scheduleError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, rmq.ErrScheduleNotFound):
		respond.WriteError(w, http.StatusNotFound, "schedule not found")
	case errors.Is(err, producer.ErrTypeMismatch):
		respond.WriteError(w, http.StatusBadRequest, "range-merge queues take no schedule")
	case errors.Is(err, rmq.ErrInvalidSchedule):
		respond.WriteError(w, http.StatusBadRequest, strings.TrimPrefix(err.Error(), "rmq: "))
	default:
		s.LibError(w, r, err)
	}
}

// parseSchedule reads a set's query: spec (required), tz, catch_up and ttl
// in seconds, tries, priority, paused. It returns the 400 text, or "".
func parseSchedule(r *http.Request, sc *rmq.Schedule) string {
	q := r.URL.Query()
	sc.Spec = q.Get("spec")
	if sc.Spec == "" {
		return "invalid spec"
	}
	if tz := q.Get("tz"); tz != "" {
		loc, err := time.LoadLocation(tz)
		if err != nil || tz == "Local" {
			return "invalid tz"
		}
		sc.Location = loc
	}
	catchUp, ok := params.QueryUint(q, "catch_up", 0, params.MaxUint32)
	if !ok {
		return "invalid catch_up"
	}
	sc.CatchUp = time.Duration(catchUp) * time.Second
	ttl, ok := params.QueryUint(q, "ttl", params.DefaultTTL, params.MaxUint32)
	if !ok {
		return "invalid ttl"
	}
	if ttl > params.MaxSpan {
		return params.ErrTTLTooLong
	}
	tries, ok := params.QueryUint(q, "tries", params.DefaultTries, params.MaxTries)
	if !ok || tries == 0 {
		return "invalid tries"
	}
	if q.Has("priority") {
		v, ok := params.QueryUint(q, "priority", 0, 1<<53)
		if !ok {
			return "invalid priority"
		}
		sc.Priority = int64(v)
	}
	switch q.Get("paused") {
	case "", "false", "0":
	case "true", "1":
		sc.Paused = true
	default:
		return "invalid paused"
	}
	sc.Options = pull.JobSpec{Tries: int(tries), TTL: time.Duration(ttl) * time.Second}.SendOptions()
	return ""
}

func (s *handlers) setSchedule(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	var sc rmq.Schedule
	if bad := parseSchedule(r, &sc); bad != "" {
		respond.WriteError(w, http.StatusBadRequest, bad)
		return
	}
	body, err := respond.ReadBody(w, r, params.MaxJobSize)
	if err != nil {
		if respond.IsTooLarge(err) {
			respond.WriteError(w, http.StatusRequestEntityTooLarge, "body too large")
			return
		}
		respond.WriteError(w, http.StatusBadRequest, "invalid body")
		return
	}
	if len(body) == 0 {
		respond.WriteError(w, http.StatusBadRequest, "invalid body")
		return
	}
	if !s.queueAllowed(w, r, qr) {
		return
	}
	t, err := qr.Pool.PublishTopic(r.Context(), qr.Ns, qr.Q, 0)
	if err != nil {
		s.LibError(w, r, err)
		return
	}
	name, bad := scheduleName(t.Name(), qr.ID)
	if bad != "" {
		respond.WriteError(w, http.StatusBadRequest, bad)
		return
	}
	if bad := s.Cfg.Quotas.CheckInterval(sc, time.Now()); bad != "" {
		respond.WriteError(w, http.StatusBadRequest, bad)
		return
	}
	sc.Name, sc.Topic, sc.Body = name, t, body
	added, err := qr.Pool.ReserveSchedule(r.Context(), qr.Ns, name, s.Cfg.Quotas.MaxSchedules)
	if errors.Is(err, pull.ErrTooManySchedules) {
		quota.WriteQuota(w, "too many schedules in the namespace", s.Cfg.Quotas.MaxSchedules, "max-schedules")
		return
	}
	if err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	ss := qr.Pool.Client.Schedules()
	if err := ss.Set(r.Context(), sc); err != nil {
		if added {
			qr.Pool.UnreserveSchedule(qr.Ns, name)
		}
		s.scheduleError(w, r, err)
		return
	}
	qr.Pool.Defined(t)
	info, err := ss.Get(r.Context(), name)
	if err != nil {
		s.scheduleError(w, r, err)
		return
	}
	respond.WriteJSON(w, http.StatusCreated, struct {
		Msg      string       `json:"msg"`
		Schedule ScheduleJSON `json:"schedule"`
	}{"schedule set", toScheduleJSON(info, schedulePrefix(t.Name()))})
}

func (s *handlers) getSchedule(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	tn, name, ok := s.scheduleNames(w, qr)
	if !ok {
		return
	}
	info, err := qr.Pool.Client.Schedules().Get(r.Context(), name)
	if err != nil {
		s.scheduleError(w, r, err)
		return
	}
	respond.WriteJSON(w, http.StatusOK, struct {
		Schedule ScheduleJSON `json:"schedule"`
	}{toScheduleJSON(info, schedulePrefix(tn))})
}

func (s *handlers) listSchedules(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	tn := names.TopicName(qr.Ns, qr.Q)
	prefix := schedulePrefix(tn)
	// Only this queue's schedules are read: List would load every
	// schedule of the pool, other tenants' bodies too.
	all, err := qr.Pool.Client.Schedules().ListPrefix(r.Context(), prefix)
	if err != nil {
		s.scheduleError(w, r, err)
		return
	}
	out := []ScheduleJSON{}
	for _, info := range all {
		if info.Topic.Name() == tn && strings.HasPrefix(info.Name, prefix) {
			out = append(out, toScheduleJSON(info, prefix))
		}
	}
	respond.WriteJSON(w, http.StatusOK, struct {
		Schedules []ScheduleJSON `json:"schedules"`
	}{out})
}

func (s *handlers) removeSchedule(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	_, name, ok := s.scheduleNames(w, qr)
	if !ok {
		return
	}
	err := qr.Pool.Client.Schedules().Remove(r.Context(), name)
	if err == nil || errors.Is(err, rmq.ErrScheduleNotFound) {
		qr.Pool.UnreserveSchedule(qr.Ns, name)
	}
	if err != nil {
		s.scheduleError(w, r, err)
		return
	}
	respond.WriteNoContent(w)
}

func (s *handlers) pauseSchedule(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	s.scheduleOp(w, r, qr, "paused", (*rmq.Schedules).Pause)
}

func (s *handlers) resumeSchedule(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	s.scheduleOp(w, r, qr, "resumed", (*rmq.Schedules).Resume)
}

func (s *handlers) scheduleOp(w http.ResponseWriter, r *http.Request, qr *service.QueueReq, done string, op func(*rmq.Schedules, context.Context, string) error) {
	_, name, ok := s.scheduleNames(w, qr)
	if !ok {
		return
	}
	if err := op(qr.Pool.Client.Schedules(), r.Context(), name); err != nil {
		s.scheduleError(w, r, err)
		return
	}
	respond.WriteJSON(w, http.StatusOK, respond.MsgBody{Msg: "schedule " + done})
}

func (s *handlers) triggerSchedule(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	_, name, ok := s.scheduleNames(w, qr)
	if !ok {
		return
	}
	id, err := qr.Pool.Client.Schedules().Trigger(r.Context(), name)
	if err != nil {
		s.scheduleError(w, r, err)
		return
	}
	respond.WriteJSON(w, http.StatusCreated, struct {
		Msg   string `json:"msg"`
		JobID string `json:"job_id"`
	}{"triggered", id})
}
