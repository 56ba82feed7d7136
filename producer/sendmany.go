package producer

import (
	"context"
	"fmt"

	"github.com/rmq-go/rmq/topic"
)

// TopicMessage is one message of SendMany: a BatchMessage and its topic.
type TopicMessage struct {
	Topic topic.Topic
	BatchMessage
}

// SendMany stores messages of any topics, each checked and reported on its
// own: ids[i] and errs[i] are msgs[i]'s outcome. A message that fails its
// checks is not written and does not hold back the others. The rest ride
// as few script calls as the backend allows (one on a single node, up to
// its size limits; one per slot on a cluster), pipelined.
//
// It is for a server that gathers the sends of concurrent requests into
// one write (rmqd): SendBatch refuses a whole batch for one bad message,
// and takes one topic. Send hooks see ctx, not the contexts of the
// requests the messages came from.
func (p *Producer) SendMany(ctx context.Context, msgs []TopicMessage) (ids []string, errs []error) {
	ids = make([]string, len(msgs))
	errs = make([]error, len(msgs))
	items := make([]*pending, len(msgs))
	afters := make([][]func(string, error), len(msgs))
	// Every check first, so nothing is written for a refused message.
	for i, m := range msgs {
		if err := p.checkTopic(m.Topic, m.Topic.Type()); err != nil {
			errs[i] = err
			continue
		}
		it, err := p.batchItem(m.Topic, m.BatchMessage)
		if err != nil {
			errs[i] = err
			continue
		}
		afters[i] = p.runHooks(ctx, it)
		if err := it.encodeOptions(); err != nil {
			errs[i] = err
			callAfters(afters[i], "", err)
			continue
		}
		items[i] = it
	}
	// Each topic's definition, once per topic of the batch.
	defined := map[string]error{}
	var send []*pending
	for i, it := range items {
		if it == nil {
			continue
		}
		name := it.topic.Name()
		err, done := defined[name]
		if !done {
			err = p.define(ctx, it.topic)
			defined[name] = err
		}
		if err == nil && it.job.group != "" {
			err = p.markGrouped(ctx, it.topic)
		}
		if err != nil {
			errs[i] = err
			callAfters(afters[i], "", err)
			items[i] = nil
			continue
		}
		send = append(send, it)
	}
	if len(send) > 0 {
		// runCalls records each message's own error (its script call's).
		_ = p.runCalls(ctx, p.group(send))
	}
	for i, it := range items {
		if it == nil {
			continue
		}
		if it.err != nil {
			errs[i] = fmt.Errorf("rmq: send to %s: %w", it.topic.Name(), it.err)
			callAfters(afters[i], "", errs[i])
			continue
		}
		ids[i] = it.id
		callAfters(afters[i], it.id, nil)
		if p.notify != nil {
			p.notify.Sent(it.topic, int(it.res))
		}
	}
	return ids, errs
}
