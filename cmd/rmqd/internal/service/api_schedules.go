package service

// api_schedules.go: the schedules of a queue (an RMQ extension, issue 24).
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
)

// scheduleRoutes adds the schedule routes to the API router.
func (s *Service) scheduleRoutes(q func(pattern string, o routeOpts, h queueHandler)) {
	// Every route that writes takes a unit of the token's write limit,
	// as a publish does: a trigger publishes a job, a set replaces one.
	w := routeOpts{throttle: throttleWrite}
	q("GET /api/{ns}/{q}/schedules", routeOpts{}, s.listSchedules)
	q("PUT /api/{ns}/{q}/schedule/{name}", w, s.setSchedule)
	q("GET /api/{ns}/{q}/schedule/{name}", routeOpts{}, s.getSchedule)
	q("DELETE /api/{ns}/{q}/schedule/{name}", w, s.removeSchedule)
	q("POST /api/{ns}/{q}/schedule/{name}/pause", w, s.pauseSchedule)
	q("POST /api/{ns}/{q}/schedule/{name}/resume", w, s.resumeSchedule)
	q("POST /api/{ns}/{q}/schedule/{name}/trigger", w, s.triggerSchedule)
}

// scheduleJSON is a schedule as the routes answer it.
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
func (s *Service) scheduleNames(w http.ResponseWriter, qr *queueReq) (string, string, bool) {
	tn := names.TopicName(qr.ns, qr.q)
	name, bad := scheduleName(tn, qr.id)
	if bad != "" {
		respond.WriteError(w, http.StatusBadRequest, bad)
		return tn, "", false
	}
	return tn, name, true
}

// scheduleError answers an error of the schedules API.
func (s *Service) scheduleError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, rmq.ErrScheduleNotFound):
		respond.WriteError(w, http.StatusNotFound, "schedule not found")
	case errors.Is(err, producer.ErrTypeMismatch):
		respond.WriteError(w, http.StatusBadRequest, "range-merge queues take no schedule")
	case errors.Is(err, rmq.ErrInvalidSchedule):
		respond.WriteError(w, http.StatusBadRequest, strings.TrimPrefix(err.Error(), "rmq: "))
	default:
		s.libError(w, r, err)
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
	sc.Options = JobSpec{Tries: int(tries), ttl: time.Duration(ttl) * time.Second}.sendOptions()
	return ""
}

func (s *Service) setSchedule(w http.ResponseWriter, r *http.Request, qr *queueReq) {
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
	t, err := qr.pool.publishTopic(r.Context(), qr.ns, qr.q, 0)
	if err != nil {
		s.libError(w, r, err)
		return
	}
	name, bad := scheduleName(t.Name(), qr.id)
	if bad != "" {
		respond.WriteError(w, http.StatusBadRequest, bad)
		return
	}
	if bad := s.cfg.Quotas.checkInterval(sc, time.Now()); bad != "" {
		respond.WriteError(w, http.StatusBadRequest, bad)
		return
	}
	sc.Name, sc.Topic, sc.Body = name, t, body
	added, err := qr.pool.reserveSchedule(r.Context(), qr.ns, name, s.cfg.Quotas.MaxSchedules)
	if errors.Is(err, errTooManySchedules) {
		writeQuota(w, "too many schedules in the namespace", s.cfg.Quotas.MaxSchedules, "max-schedules")
		return
	}
	if err != nil {
		s.writeInternal(w, r, err)
		return
	}
	ss := qr.pool.client.Schedules()
	if err := ss.Set(r.Context(), sc); err != nil {
		if added {
			qr.pool.unreserveSchedule(qr.ns, name)
		}
		s.scheduleError(w, r, err)
		return
	}
	qr.pool.defined(t)
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

func (s *Service) getSchedule(w http.ResponseWriter, r *http.Request, qr *queueReq) {
	tn, name, ok := s.scheduleNames(w, qr)
	if !ok {
		return
	}
	info, err := qr.pool.client.Schedules().Get(r.Context(), name)
	if err != nil {
		s.scheduleError(w, r, err)
		return
	}
	respond.WriteJSON(w, http.StatusOK, struct {
		Schedule ScheduleJSON `json:"schedule"`
	}{toScheduleJSON(info, schedulePrefix(tn))})
}

func (s *Service) listSchedules(w http.ResponseWriter, r *http.Request, qr *queueReq) {
	tn := names.TopicName(qr.ns, qr.q)
	prefix := schedulePrefix(tn)
	// Only this queue's schedules are read: List would load every
	// schedule of the pool, other tenants' bodies too.
	all, err := qr.pool.client.Schedules().ListPrefix(r.Context(), prefix)
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

func (s *Service) removeSchedule(w http.ResponseWriter, r *http.Request, qr *queueReq) {
	_, name, ok := s.scheduleNames(w, qr)
	if !ok {
		return
	}
	err := qr.pool.client.Schedules().Remove(r.Context(), name)
	if err == nil || errors.Is(err, rmq.ErrScheduleNotFound) {
		qr.pool.unreserveSchedule(qr.ns, name)
	}
	if err != nil {
		s.scheduleError(w, r, err)
		return
	}
	respond.WriteNoContent(w)
}

func (s *Service) pauseSchedule(w http.ResponseWriter, r *http.Request, qr *queueReq) {
	s.scheduleOp(w, r, qr, "paused", (*rmq.Schedules).Pause)
}

func (s *Service) resumeSchedule(w http.ResponseWriter, r *http.Request, qr *queueReq) {
	s.scheduleOp(w, r, qr, "resumed", (*rmq.Schedules).Resume)
}

func (s *Service) scheduleOp(w http.ResponseWriter, r *http.Request, qr *queueReq, done string, op func(*rmq.Schedules, context.Context, string) error) {
	_, name, ok := s.scheduleNames(w, qr)
	if !ok {
		return
	}
	if err := op(qr.pool.client.Schedules(), r.Context(), name); err != nil {
		s.scheduleError(w, r, err)
		return
	}
	respond.WriteJSON(w, http.StatusOK, respond.MsgBody{Msg: "schedule " + done})
}

func (s *Service) triggerSchedule(w http.ResponseWriter, r *http.Request, qr *queueReq) {
	_, name, ok := s.scheduleNames(w, qr)
	if !ok {
		return
	}
	id, err := qr.pool.client.Schedules().Trigger(r.Context(), name)
	if err != nil {
		s.scheduleError(w, r, err)
		return
	}
	respond.WriteJSON(w, http.StatusCreated, struct {
		Msg   string `json:"msg"`
		JobID string `json:"job_id"`
	}{"triggered", id})
}
