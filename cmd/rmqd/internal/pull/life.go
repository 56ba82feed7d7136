package pull

// life.go: a job's life after hand-off as rmqd serves it (its state and
// result by id, and the progress of a consumed job).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// LookupInfo is LookupJob with what the Inspector says of the job's life:
// its state, attempts, last error, and for a job a retaining queue keeps
// after it finished (completed, cancelled) its result. A finished job's
// ttl no longer counts: it is kept for the queue's retention.
func (p *Pool) LookupInfo(ctx context.Context, t topic.Topic, id string, now time.Time) (j Job, m rmq.MessageInfo, found bool, err error) {
	m, err = p.Insp.Message(ctx, t, id)
	if errors.Is(err, rmq.ErrMessageNotFound) {
		return Job{}, rmq.MessageInfo{}, false, nil
	}
	if err != nil {
		return Job{}, rmq.MessageInfo{}, false, err
	}
	if Finished(m.State) {
		j = infoJob(t, id, m)
		j.expiresAt = time.Time{}
		return j, m, true, nil
	}
	if expiredAt(m, now) {
		return Job{}, rmq.MessageInfo{}, false, nil
	}
	return infoJob(t, id, m), m, true, nil
}

// Finished reports whether s is a state a job does not leave.
func Finished(s rmq.MessageState) bool {
	return s == rmq.StateCompleted || s == rmq.StateCancelled || s == rmq.StateDead
}

// InfoJob is the job of a MessageInfo a Wait answered: with its body when
// the Inspector read it, else with its data gone (a finished job a queue
// does not retain: the word that it finished carries its result only).
func InfoJob(t topic.Topic, m rmq.MessageInfo) Job {
	if m.Body == nil && m.FirstSentAt.IsZero() {
		return Job{Topic: t, ID: m.ID, gone: true}
	}
	j := infoJob(t, m.ID, m)
	j.expiresAt = time.Time{}
	return j
}

// ProgressResult is what Progress did.
type ProgressResult int

const (
	ProgressStored      ProgressResult = iota
	ProgressNotInFlight                // no delivery of the job is in flight
	ProgressStale                      // the delivery read ended before the write
)

// Progress stores data as the progress of the job's delivery in flight
// (rmq.Client.SetProgressByID, which also records a progress event when
// the queue keeps an event log). rmqd keeps no delivery between requests,
// so, as its ack and nack, it names the delivery current when it is read,
// not the one a consume handed out: a delivery that ended between the
// read and the write is ProgressStale (nothing written). A delivery held
// ahead of its instant was not handed to anyone yet: not in flight.
func (p *Pool) Progress(ctx context.Context, t topic.Topic, id string, data []byte) (ProgressResult, error) {
	stored, err := p.Client.SetProgressByID(ctx, t, id, data)
	switch {
	case errors.Is(err, consumer.ErrNotCurrent):
		return ProgressStale, nil
	case err != nil:
		return 0, fmt.Errorf("rmqd: progress of %s: %w", id, err)
	case !stored:
		return ProgressNotInFlight, nil
	}
	return ProgressStored, nil
}
