package pull

import (
	"context"

	"github.com/rmq-go/rmq/internal/groupcommit"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// publisher gathers the single publishes of concurrent requests, to any
// queue of its pool, into shared writes: a publish that finds no write in
// flight goes at once; those arriving meanwhile ride the next write
// together, one producer.SendMany (one script call on a single node).
// Each request still gets its own outcome: SendMany checks and reports
// every job by itself, so one request's bad job fails only that request.
//
// The producer group-commits single sends by itself too, with two writes
// in flight; one here makes the writes larger under load, and a write's
// cost in Redis is mostly per call, not per job.
type publisher struct {
	prod *producer.Producer
	gc   *groupcommit.Group[*pubReq]
}

// publishRounds is how many writes may be in flight at once.
const publishRounds = 1

// Bounds of one write: jobs and bytes of their bodies (a body is at most
// maxJobSize, so one large job still goes alone).
const (
	maxRoundJobs  = 512
	maxRoundBytes = 8 << 20
)

// pubReq is one job on its way; err is its outcome.
type pubReq struct {
	msg producer.TopicMessage
	err error
}

func NewPublisher(prod *producer.Producer) *publisher {
	p := &publisher{prod: prod}
	p.gc = groupcommit.New(publishRounds, p.write, roundSize)
	return p
}

// roundSize is how many queued jobs the next write takes.
func roundSize(q []*pubReq) int {
	n, size := 0, 0
	for n < len(q) && n < maxRoundJobs && (n == 0 || size+len(q[n].msg.Body) <= maxRoundBytes) {
		size += len(q[n].msg.Body)
		n++
	}
	return n
}

func (p *publisher) write(ctx context.Context, batch []*pubReq) {
	msgs := make([]producer.TopicMessage, len(batch))
	for i, r := range batch {
		msgs[i] = r.msg
	}
	_, errs := p.prod.SendMany(ctx, msgs)
	for i, r := range batch {
		r.err = errs[i]
	}
}

// Queued is how many publishes wait for a write (not those of the write
// under way): tests use it to know that publishes queued behind a write.
func (p *publisher) Queued() int { return p.gc.Queued() }

// Publish stores one job in t. A caller whose ctx ends first gets ctx's
// error, and its job may still be written (as after any timeout).
func (p *publisher) Publish(ctx context.Context, t topic.Topic, m producer.BatchMessage) error {
	r := &pubReq{msg: producer.TopicMessage{Topic: t, BatchMessage: m}}
	if err := p.gc.Do(ctx, r); err != nil {
		return err
	}
	return r.err
}
