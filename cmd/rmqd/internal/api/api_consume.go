package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/topic"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/encode"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/params"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/auth"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/pull"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/service"
)

// minLease stands in for ttr=0, which lmstfy redelivers at its next
// 1-second tick: the library's leases are whole seconds, at least one.
const minLease = time.Second

// consume is GET /api/{ns}/{q1,q2,...}: up to count jobs, the listed
// queues in priority order, waiting up to timeout seconds for the first.
func (s *handlers) consume(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	q := r.URL.Query()
	ttr, ok := params.QueryUint(q, "ttr", params.DefaultTTR, params.MaxUint32)
	if !ok {
		respond.WriteError(w, http.StatusBadRequest, "invalid ttr")
		return
	}
	if ttr > params.MaxTTR {
		respond.WriteError(w, http.StatusBadRequest, params.ErrTTRTooLong)
		return
	}
	timeout, ok := params.QueryUint(q, "timeout", 0, params.MaxUint32)
	if !ok {
		respond.WriteError(w, http.StatusBadRequest, "invalid timeout")
		return
	}
	count, ok := params.QueryUint(q, "count", 1, params.MaxCount)
	if !ok || count == 0 {
		respond.WriteError(w, http.StatusBadRequest, "invalid count")
		return
	}
	queues := names.ConsumeQueues(qr.Q)
	if queues == nil {
		respond.WriteError(w, http.StatusBadRequest, "invalid queue name(s)")
		return
	}
	if len(queues) > MaxConsumeQueues {
		respond.WriteError(w, http.StatusBadRequest, "too many queues")
		return
	}

	arrived := time.Now()
	lease := max(time.Duration(ttr)*time.Second, minLease)
	wait := min(time.Duration(timeout)*time.Second, s.Cfg.MaxWait)
	ctx := r.Context()
	if wait > 0 {
		// A long poll ends when the client goes away or shutdown begins
		// (a consume that does not wait ends by itself: it needs neither).
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(s.Stopping, cancel)
		defer stop()
		s.Log.DebugContext(ctx, "rmqd: long poll", "request_id", respond.RequestID(w), "wait", wait)
	}
	jobs, queueOf, err := s.pullQueues(ctx, qr, queues, int(count), lease, time.Now().Add(wait))
	if errors.Is(err, auth.ErrTooManyWatched) {
		auth.WritePollRefused(w, err)
		return
	}
	if err != nil && !(ctx.Err() != nil && errors.Is(err, context.Canceled)) {
		s.LibError(w, r, err)
		return
	}
	if len(jobs) == 0 {
		respond.WriteJSON(w, http.StatusNotFound, respond.MsgBody{Msg: "no job available"})
		return
	}
	s.Metrics.Consumed.Add(uint64(len(jobs)))
	now := time.Now()
	if qr.Pool.Name == names.DefaultPool {
		s.countFirings(jobs, arrived, now)
	}
	out := make([]encode.JobBody, len(jobs))
	for i, j := range jobs {
		out[i] = j.Answer(qr.Ns, queueOf[j.Topic.Name()], "new job", now)
	}
	if r.Context().Err() != nil {
		// The client went away (or its token was deleted) while the jobs
		// were taken: nobody will get them.
		s.releaseJobs(r, jobs)
		return
	}
	// The answer goes out now, with its length, so a failed write is seen
	// here: one write as net/http's own at the handler's end would be, not
	// a chunked answer and a second write for its last chunk.
	body := encode.JobsJSON(out, count > 1)
	h := w.Header()
	h[respond.HeaderContentType] = respond.JSONContentType
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(body)
	if err == nil {
		err = http.NewResponseController(w).Flush()
	}
	if err != nil {
		s.releaseJobs(r, jobs)
	}
}

// releaseJobs gives consumed jobs whose answer could not be written back
// at once without counting an attempt (a snooze of 0): left to their
// lease, they came back only after ttr with a try spent, and with lmstfy's
// default of one try went dead unprocessed. A job the client got after
// all (the write failed late) is delivered again: at least once, as after
// a lost ack.
func (s *handlers) releaseJobs(r *http.Request, jobs []pull.Job) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	released := 0
	for _, j := range jobs {
		if j.Delivery == nil {
			continue
		}
		if err := j.Delivery.Nack(ctx, 0, consumer.Snooze(0)); err != nil {
			s.Log.WarnContext(ctx, "rmqd: could not release a job its client did not get; it comes back after its ttr",
				"topic", j.Topic.Name(), "job_id", j.ID, "err", err)
			continue
		}
		released++
	}
	s.Log.DebugContext(ctx, "rmqd: released the jobs of a consume whose answer could not be written", "jobs", released)
}

// MaxConsumeQueues bounds the queues one consume names (lmstfy has no
// bound): each one that exists is a fetch per attempt and a pull engine.
const MaxConsumeQueues = 100

// pullQueues takes up to n jobs from the queues of ns named (in priority
// order, duplicates counted once) until deadline. Only queues that exist
// are pulled: a consume of a queue never published to creates nothing. A
// long poll that names such a queue is woken when it comes to exist
// (queueWatch) and then pulls it too. queueOf maps the topics' names to
// their queues. The definitions of the names not yet known are read in one
// HMGET per pass (pool.lookupAll).
//
// The names a long poll watches count against its token's and the
// process's bounds (../auth/pollcap.go): beyond them it ends with
// errTooManyWatched.
func (s *handlers) pullQueues(ctx context.Context, qr *service.QueueReq, queues []string, n int, lease time.Duration, deadline time.Time) (jobs []pull.Job, queueOf map[string]string, err error) {
	p, ns := qr.Pool, qr.Ns
	queueOf = make(map[string]string, len(queues))
	tnames := make([]string, 0, len(queues))
	for _, q := range queues {
		name := names.TopicName(ns, q)
		if _, dup := queueOf[name]; !dup {
			queueOf[name] = q
			tnames = append(tnames, name)
		}
	}
	for {
		// Each pass looks at every name again: the queues found before
		// are pulled too, with those that came to exist since.
		ts, exists, err := p.LookupAll(ctx, tnames)
		if err != nil {
			return nil, nil, err
		}
		var topics []topic.Topic
		var missing []string
		for i, name := range tnames {
			if exists[i] {
				topics = append(topics, ts[i])
			} else {
				missing = append(missing, name)
			}
		}
		wait := time.Until(deadline)
		if len(topics) > 0 {
			// What is ready now, in a round shared with concurrent
			// consumes of the same queues; only one that may wait for
			// more goes on by itself.
			jobs, err = p.Rounds.Pull(ctx, topics, n, lease, wait > 0)
			if len(jobs) > 0 || err != nil || wait <= 0 {
				return jobs, queueOf, err
			}
		}
		var appeared chan struct{}
		var unwatch func()
		if len(missing) > 0 && wait > 0 {
			release, err := s.PollCaps.Watch(qr.Ref, len(missing))
			if err != nil {
				return nil, nil, err
			}
			appeared, unwatch = p.Watch.Wait(missing)
			unwatch = func(unwait func()) func() {
				return func() { unwait(); release() }
			}(unwatch)
		}
		jobs, err = pullOrWait(ctx, p, topics, n, lease, max(wait, 0), appeared)
		if unwatch != nil {
			unwatch()
		}
		if len(jobs) > 0 || ctx.Err() != nil || !closed(appeared) {
			return jobs, queueOf, err
		}
		// A queue it names came to exist: pull it too, for what is left.
	}
}

// pullOrWait pulls topics, waiting up to wait; it gives up early, with no
// jobs and no error, once appeared is closed. With no topics it only waits.
func pullOrWait(ctx context.Context, p *pull.Pool, topics []topic.Topic, n int, lease, wait time.Duration, appeared chan struct{}) ([]pull.Job, error) {
	if len(topics) == 0 {
		if appeared == nil {
			return nil, nil
		}
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-appeared:
		case <-t.C:
		}
		return nil, nil
	}
	if appeared == nil {
		return p.Pull(ctx, topics, n, lease, wait)
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-appeared:
			cancel()
		case <-pctx.Done():
		}
	}()
	jobs, err := p.Pull(pctx, topics, n, lease, wait)
	cancel()
	<-watched
	if ctx.Err() == nil && closed(appeared) && errors.Is(err, context.Canceled) {
		err = nil
	}
	return jobs, err
}

// closed reports whether ch (nil: never) is closed.
func closed(ch chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// countFirings gives the dashboard's firing-lateness chart the jobs that
// came due while this consume waited for them: how long after their due
// time rmqd had them. A job due before the consume came waited for a
// consumer, not for its time, and is not a firing. An undelayed job is due
// when it was published (it is stored as due a little earlier: see
// immediateSkew).
func (s *handlers) countFirings(jobs []pull.Job, arrived, now time.Time) {
	for _, j := range jobs {
		due := j.DueAt
		if due.IsZero() {
			continue // a priority queue's job has no due time
		}
		if j.FirstSentAt.After(due) {
			due = j.FirstSentAt
		}
		if due.After(arrived) {
			s.Counters.Fired(j.Topic.Name(), now.Sub(due))
		}
	}
}
