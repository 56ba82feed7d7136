package main

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/rmq-go/rmq/topic"
)

// minLease stands in for ttr=0, which lmstfy redelivers at its next
// 1-second tick: the library's leases are whole seconds, at least one.
const minLease = time.Second

// jobBody is a job as consume and peek answer it. data is standard base64;
// nil encodes as null (a peeked head whose data is gone), empty as "".
type jobBody struct {
	Msg         string            `json:"msg,omitempty"`
	Namespace   string            `json:"namespace"`
	Queue       string            `json:"queue"`
	JobID       string            `json:"job_id"`
	Data        []byte            `json:"data"`
	TTL         int64             `json:"ttl"`
	ElapsedMS   int64             `json:"elapsed_ms"`
	RemainTries int               `json:"remain_tries"`
	Attributes  map[string]string `json:"attributes"`
}

func (j job) answer(ns, q, msg string, now time.Time) jobBody {
	b := jobBody{Msg: msg, Namespace: ns, Queue: q, JobID: j.id, Data: j.body, RemainTries: j.remainTries}
	if j.gone {
		b.Data = nil
	} else if b.Data == nil {
		b.Data = []byte{}
	}
	if !j.expiresAt.IsZero() && !j.gone {
		b.TTL = ttlSeconds(j.expiresAt.Sub(now))
	}
	if !j.firstSentAt.IsZero() {
		b.ElapsedMS = max(0, now.Sub(j.firstSentAt).Milliseconds())
	}
	if len(j.headers) > 0 {
		b.Attributes = j.headers
	}
	return b
}

// ttlSeconds is a job's remaining ttl as lmstfy answers it: Redis's TTL of
// the job's data, which rounds the milliseconds left to the nearest second
// (half up), so a job published with ttl=10 and consumed at once says 10.
// Less than half a second left says 0, as there.
func ttlSeconds(left time.Duration) int64 {
	return max(0, (left.Milliseconds()+500)/1000)
}

// consume is GET /api/{ns}/{q1,q2,...}: up to count jobs, the listed
// queues in priority order, waiting up to timeout seconds for the first.
func (s *service) consume(w http.ResponseWriter, r *http.Request, qr *queueReq) {
	q := r.URL.Query()
	ttr, ok := queryUint(q, "ttr", defaultTTR, maxUint32)
	if !ok {
		writeError(w, http.StatusBadRequest, "invalid ttr")
		return
	}
	if ttr > maxTTR {
		writeError(w, http.StatusBadRequest, errTTRTooLong)
		return
	}
	timeout, ok := queryUint(q, "timeout", 0, maxUint32)
	if !ok {
		writeError(w, http.StatusBadRequest, "invalid timeout")
		return
	}
	count, ok := queryUint(q, "count", 1, maxCount)
	if !ok || count == 0 {
		writeError(w, http.StatusBadRequest, "invalid count")
		return
	}
	names := consumeQueues(qr.q)
	if names == nil {
		writeError(w, http.StatusBadRequest, "invalid queue name(s)")
		return
	}
	topics := make([]topic.Topic, 0, len(names))
	queues := make([]string, 0, len(names)) // the queue of each topic
	for _, name := range names {
		t, _, err := qr.pool.queueTopic(r.Context(), qr.ns, name)
		if err != nil {
			s.writeInternal(w, r, err)
			return
		}
		if slices.ContainsFunc(topics, func(x topic.Topic) bool { return x.Name() == t.Name() }) {
			continue
		}
		topics = append(topics, t)
		queues = append(queues, name)
	}
	queueOf := func(t topic.Topic) string {
		for i, x := range topics {
			if x.Name() == t.Name() {
				return queues[i]
			}
		}
		return ""
	}

	lease := max(time.Duration(ttr)*time.Second, minLease)
	wait := min(time.Duration(timeout)*time.Second, s.cfg.MaxWait)
	// A long poll ends when the client goes away or shutdown begins.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.stopping, cancel)
	defer stop()

	if wait > 0 {
		s.log.DebugContext(ctx, "rmqd: long poll", "request_id", requestID(w), "wait", wait)
	}
	jobs, err := qr.pool.pull(ctx, topics, int(count), lease, wait)
	if err != nil && !(ctx.Err() != nil && errors.Is(err, context.Canceled)) {
		s.libError(w, r, err)
		return
	}
	if len(jobs) == 0 {
		writeJSON(w, http.StatusNotFound, msgBody{"no job available"})
		return
	}
	s.metrics.consumed.Add(uint64(len(jobs)))
	now := time.Now()
	out := make([]jobBody, len(jobs))
	for i, j := range jobs {
		out[i] = j.answer(qr.ns, queueOf(j.topic), "new job", now)
	}
	writeRawJSON(w, http.StatusOK, jobsJSON(out, count > 1))
}
