package pull

// engine.go maps jobs onto the library's Jobs API (per-message options,
// pull, ack, nack and message lookup by id, pause).

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/encode"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
)

// JobSpec is everything a publish says about one job.
type JobSpec struct {
	ID      string
	Body    []byte
	Due     time.Time     // fixedtime: when it is due
	Window  time.Duration // rangemerge: the merge window
	Prio    int64         // priority: its priority
	NotOn   time.Time     // priority: competes only from then on (zero: now)
	Tries   int           // deliveries allowed, ≥ 1
	TTL     time.Duration // 0: never expires
	Headers map[string]string
	Group   string // "" for none (../admin/admin_flow.go)
	// UniqueFor refuses the job (producer.ErrDuplicate) when a unique job
	// of its id was published within that one's window; 0: none.
	UniqueFor time.Duration
}

// maxLibRetries is the library's largest per-message retry count; lmstfy
// allows up to 65535 tries, more than 999 are cut to 999.
const maxLibRetries = 998

// SendOptions are the per-message options of a job (the key apart).
func (j JobSpec) SendOptions() []producer.SendOption {
	opts := []producer.SendOption{producer.WithMaxRetries(min(j.Tries-1, maxLibRetries))}
	if j.TTL > 0 {
		opts = append(opts, producer.WithTTL(j.TTL))
	}
	if len(j.Headers) > 0 {
		opts = append(opts, producer.WithHeaders(j.Headers))
	}
	if !j.NotOn.IsZero() {
		opts = append(opts, producer.WithNotBefore(j.NotOn))
	}
	if j.Group != "" {
		opts = append(opts, producer.WithGroup(j.Group))
	}
	if j.UniqueFor > 0 {
		opts = append(opts, producer.WithUniqueFor(j.UniqueFor))
	}
	return opts
}

// storedBody is what goes to the library for a body (see emptyHeader).
func (j *JobSpec) storedBody() []byte {
	if len(j.Body) > 0 {
		return j.Body
	}
	// A copy: bulk jobs share one attribute map.
	h := make(map[string]string, len(j.Headers)+1)
	for k, v := range j.Headers {
		h[k] = v
	}
	h[names.EmptyHeader] = "1"
	j.Headers = h
	return []byte(" ")
}

// Message is the library's message of a job; which scheduling field
// counts depends on the queue's type.
func (j *JobSpec) Message() producer.BatchMessage {
	body := j.storedBody()
	return producer.BatchMessage{Body: body, Key: j.ID, TimeRange: j.Window, Priority: j.Prio, At: j.Due,
		Options: j.SendOptions()}
}

// Publish stores one job, in a write shared with concurrent publishes
// (publisher.go).
func (p *Pool) Publish(ctx context.Context, t topic.Topic, j JobSpec) error {
	return p.pub.Publish(ctx, t, j.Message())
}

// PublishBatch stores jobs with one script call per slot.
func (p *Pool) PublishBatch(ctx context.Context, t topic.Topic, jobs []JobSpec) error {
	msgs := make([]producer.BatchMessage, len(jobs))
	for i := range jobs {
		msgs[i] = jobs[i].Message()
	}
	_, err := p.prod.SendBatch(ctx, t, msgs)
	return err
}

// Job is a job as rmqd answers it.
type Job struct {
	Topic       topic.Topic
	ID          string
	body        []byte
	gone        bool      // peeked head whose data is gone: data null
	expiresAt   time.Time // zero: never (dead jobs never expire: lmstfy persists them)
	FirstSentAt time.Time
	DueAt       time.Time // consumed jobs of time-based queues: when it was due
	RemainTries int
	headers     map[string]string // emptyHeader already applied and removed
	Delivery    *rmq.Delivery     // a consumed job's delivery (release)
}

// Pull hands out up to n due jobs of the topics (first topic first),
// leased for lease, waiting up to wait for the first one.
func (p *Pool) Pull(ctx context.Context, topics []topic.Topic, n int, lease, wait time.Duration) ([]Job, error) {
	ds, err := p.Client.Pull(ctx, topics, n, rmq.WithLease(lease), rmq.WithWait(wait))
	if err != nil {
		return nil, err
	}
	jobs := make([]Job, len(ds))
	for i, d := range ds {
		t := topics[0]
		for _, x := range topics[1:] {
			if x.Name() == d.Topic {
				t = x
			}
		}
		jobs[i] = Job{Topic: t, ID: d.ID, body: d.Body, expiresAt: d.ExpiresAt, FirstSentAt: d.FirstSentAt, DueAt: d.DueAt,
			RemainTries: triesLeft(d.MaxRetries, d.Attempt), headers: d.Headers, Delivery: d}.fromStored()
	}
	return jobs, nil
}

// triesLeft is lmstfy's remain_tries: deliveries left after `done` ones.
// A message without its own limit (sent by a Go program) has the library
// consumer's default of 16 retries.
func triesLeft(maxRetries, done int) int {
	if maxRetries < 0 {
		maxRetries = 16
	}
	return max(0, maxRetries+1-done)
}

// Ack ends a job wherever it is (lmstfy's DELETE job): an in-flight
// delivery is acked by id without its fencing token, with result (nil:
// none), a waiting or delayed job is removed, a dead one deleted. Unknown
// ids are fine.
func (p *Pool) Ack(ctx context.Context, t topic.Topic, id string, result []byte) error {
	if acked, err := p.Client.AckByIDWithResult(ctx, t, id, result); err != nil || acked {
		return err
	}
	removed, err := p.prod.Remove(ctx, t, id)
	if err != nil || removed != producer.NotFound {
		return err
	}
	_, err = p.Insp.DeleteDead(ctx, t, id)
	return err
}

// Destroy removes every ready job of t (lmstfy's DELETE queue): delayed
// and in-flight jobs and the dead letter are left alone. It reads ids
// only (destroyIDs), never a body: reading the ready jobs with their
// bodies (the inspector's Peek) held up to 500 bodies of 1 MiB at once.
func (p *Pool) Destroy(ctx context.Context, t topic.Topic) error {
	for {
		ids, err := p.destroyIDs(ctx, t, destroyBatch)
		if err != nil || len(ids) == 0 {
			return err
		}
		progress := false
		for _, id := range ids {
			removed, err := p.prod.Remove(ctx, t, id)
			if err != nil {
				return err
			}
			progress = progress || removed == producer.RemovedWaiting
		}
		if !progress {
			return nil
		}
	}
}

// destroyBatch is how many ids destroy reads per slot and pass.
const destroyBatch = 100

// destroyIDs returns up to n ids per slot of t's ready jobs (due by now
// for a time-based queue), ids only, leaving out those with a delivery in
// flight (a re-send waiting behind a running delivery: destroy leaves
// both).
func (p *Pool) destroyIDs(ctx context.Context, t topic.Topic, n int) ([]string, error) {
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	pipe := p.Rdb.Pipeline()
	cmds := make([]*redis.StringSliceCmd, t.SlotAmount())
	for i := range cmds {
		k := keyspace.KeysFor(p.prefix, t, i)
		if t.Type().TimeBased() {
			cmds[i] = pipe.ZRangeByScore(ctx, k.Store, &redis.ZRangeBy{Min: "-inf", Max: now, Count: int64(n)})
		} else {
			cmds[i] = pipe.ZRange(ctx, k.Store, 0, int64(n-1))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var ids []string
	var inflight []*redis.FloatCmd
	pipe = p.Rdb.Pipeline()
	for i, c := range cmds {
		k := keyspace.KeysFor(p.prefix, t, i)
		for _, id := range c.Val() {
			ids = append(ids, id)
			inflight = append(inflight, pipe.ZScore(ctx, k.Prepare, id))
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := ids[:0]
	for j, id := range ids {
		if inflight[j].Err() != nil { // redis.Nil: not in flight
			out = append(out, id)
		}
	}
	return out, nil
}

// Nack ends an in-flight delivery as failed, to be delivered again after
// retryAfter (0: the library's backoff), or dead when it has no try left.
// Like ack it names no fencing token: rmqd keeps no delivery between
// requests. found is false when no delivery of id is in flight.
func (p *Pool) Nack(ctx context.Context, t topic.Topic, id string, retryAfter time.Duration, cause string) (found bool, err error) {
	var why error
	if cause != "" {
		why = errors.New(cause)
	}
	return p.Client.NackByID(ctx, t, id, retryAfter, why)
}

// LookupJob returns a job in any state (delayed, ready, in flight, dead);
// found is false when its data is gone, which includes a ttl that ran out
// (the library drops such a job only when it next touches it; lmstfy's
// data key expires at once). remainTries is 0 (lmstfy does not report it
// by id).
func (p *Pool) LookupJob(ctx context.Context, t topic.Topic, id string, now time.Time) (j Job, found bool, err error) {
	m, err := p.Insp.Message(ctx, t, id)
	if errors.Is(err, rmq.ErrMessageNotFound) {
		return Job{}, false, nil
	}
	if err != nil {
		return Job{}, false, err
	}
	if expiredAt(m, now) {
		return Job{}, false, nil
	}
	return infoJob(t, id, m), true, nil
}

// expiredAt reports whether m's ttl ran out by now. A dead job never
// expires: lmstfy persists a job's data when it dies.
func expiredAt(m rmq.MessageInfo, now time.Time) bool {
	return m.State != rmq.StateDead && !m.ExpiresAt.IsZero() && !m.ExpiresAt.After(now)
}

// infoJob is a job as the Inspector reports it; remainTries counts the
// deliveries left before the next one.
func infoJob(t topic.Topic, id string, m rmq.MessageInfo) Job {
	j := Job{Topic: t, ID: id, body: m.Body, expiresAt: m.ExpiresAt, FirstSentAt: m.FirstSentAt,
		RemainTries: triesLeft(m.MaxRetries, m.Attempts), headers: m.Headers}
	if m.State == rmq.StateDead {
		j.expiresAt = time.Time{}
	}
	return j.fromStored()
}

// Head returns the ready job a consume would take next, without taking it.
func (p *Pool) Head(ctx context.Context, t topic.Topic, now time.Time) (j Job, found bool, err error) {
	ws, err := p.ReadyIDs(ctx, t, 1)
	if err != nil || len(ws) == 0 {
		return Job{}, false, err
	}
	m, err := p.Insp.Message(ctx, t, ws[0].ID)
	if errors.Is(err, rmq.ErrMessageNotFound) || err == nil && expiredAt(m, now) {
		// Acked between the two reads, or its ttl ran out (no consume will
		// get it): lmstfy shows such a head with its data gone.
		return Job{Topic: t, ID: ws[0].ID, gone: true}, true, nil
	}
	if err != nil {
		return Job{}, false, err
	}
	return infoJob(t, ws[0].ID, m), true, nil
}

// Respawn moves dead jobs back to the ready queue, fresh, in the given
// order, and returns how many moved. As in lmstfy a respawned job has one
// try and ttl to live from now (0: it never expires), whatever it had.
func (p *Pool) Respawn(ctx context.Context, t topic.Topic, ids []string, ttl time.Duration) (int, error) {
	return p.Insp.RequeueRenewed(ctx, t, 0, ttl, ids...)
}

// fromStored undoes storedBody.
func (j Job) fromStored() Job {
	if j.headers[names.EmptyHeader] != "" {
		j.body = []byte{}
	}
	if len(j.headers) > 0 {
		h := make(map[string]string, len(j.headers))
		for k, v := range j.headers {
			if k != names.EmptyHeader {
				h[k] = v
			}
		}
		j.headers = h
	}
	return j
}

// Pause stops deliveries of t (publishes still land); resume restarts them.
func (p *Pool) Pause(ctx context.Context, t topic.Topic) error { return p.Insp.Pause(ctx, t) }

func (p *Pool) Resume(ctx context.Context, t topic.Topic) error { return p.Insp.Resume(ctx, t) }

// QueueStats are the counts GET /queue/{ns}/{q} answers.
type QueueStats struct {
	Namespace string `json:"namespace"`
	Queue     string `json:"queue"`
	Type      string `json:"type"`
	Ready     int64  `json:"ready"`
	Delayed   int64  `json:"delayed"`
	InFlight  int64  `json:"in_flight"`
	Dead      int64  `json:"dead"`
	Paused    bool   `json:"paused"`
}

func (p *Pool) Stats(ctx context.Context, t topic.Topic) (QueueStats, error) {
	st, err := p.Insp.Stats(ctx, t)
	if err != nil {
		return QueueStats{}, err
	}
	// Delayed time-based jobs wait in Store, not yet due; delayed priority
	// jobs wait outside it (Stats.Delayed).
	return QueueStats{Type: t.Type().String(), Ready: st.Due, Delayed: st.Store - st.Due + st.Delayed,
		InFlight: st.Prepare, Dead: st.Dead, Paused: st.Paused}, nil
}

func (j Job) Answer(ns, q, msg string, now time.Time) encode.JobBody {
	b := encode.JobBody{Msg: msg, Namespace: ns, Queue: q, JobID: j.ID, Data: j.body, RemainTries: j.RemainTries}
	if j.gone {
		b.Data = nil
	} else if b.Data == nil {
		b.Data = []byte{}
	}
	if !j.expiresAt.IsZero() && !j.gone {
		b.TTL = TTLSeconds(j.expiresAt.Sub(now))
	}
	if !j.FirstSentAt.IsZero() {
		b.ElapsedMS = max(0, now.Sub(j.FirstSentAt).Milliseconds())
	}
	if len(j.headers) > 0 {
		b.Attributes = j.headers
	}
	return b
}

// TTLSeconds is a job's remaining ttl as lmstfy answers it: Redis's TTL of
// the job's data, which rounds the milliseconds left to the nearest second
// (half up), so a job published with ttl=10 and consumed at once says 10.
// Less than half a second left says 0, as there.
func TTLSeconds(left time.Duration) int64 {
	return max(0, (left.Milliseconds()+500)/1000)
}
