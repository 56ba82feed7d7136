package producer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/life"
	"github.com/rmq-go/rmq/internal/topicstore"
	"github.com/rmq-go/rmq/topic"
)

// redefineInterval is how often a producer that keeps sending to a topic
// checks that Redis still holds the topic's definition, and stores it again
// if not.
//
// Redis loses definitions with the rest of its data when it restarts
// without persistence, fails over to a replica that never had them, or is
// flushed; the running clients go on sending, but Inspector.Topics and
// rmqctl no longer see the topic. Why a timer and not something cheaper or
// sooner:
//   - On every send it would cost a round trip per send. Once per interval
//     it is one HGET per topic and producer, whatever the send rate.
//   - The send script cannot store it: the topics hash lives in another
//     hash slot than the topic slot's keys, and a script touches one.
//   - A go-redis hook that sees new connections would catch a restart at
//     once, but not a flush or a failover without reconnection, and a
//     hook cannot be removed from a client the producer does not own:
//     every producer made on a client would add one for good.
//
// So a lost definition is back at most this long after the first send that
// follows the loss.
const redefineInterval = 10 * time.Second

// lifeRecheckInterval is how often a producer that keeps sending to a
// topic reads the topic's lifecycle settings again: a topic whose event
// log is turned on (rmq's Inspector.SetLifecycle) records the sends of a
// running producer from at most this long after the change. One HGET per
// topic and producer per interval, whatever the send rate; the send
// scripts cannot read the settings themselves (they live in another hash
// slot than the topic slot's keys).
const lifeRecheckInterval = time.Second

// definedTopic is a topic whose stored definition this producer checked.
type definedTopic struct {
	def     string
	checked atomic.Int64 // time.Now().UnixNano() of the last check
	grouped groupedFlag  // markGrouped ran (group.go)
	// events is the topic's event log length (life.Settings.Events) as
	// last read, at lifeChecked: the send scripts record "sent" when it
	// is above 0.
	events      atomic.Int64
	lifeChecked atomic.Int64
}

// define makes sure the topic's stored definition agrees: against Redis on
// the first send to the topic, then again at most every redefineEvery, by
// the one send that finds the interval over; the others go on at once.
func (p *Producer) define(ctx context.Context, t topic.Topic) error {
	v, ok := p.defined.Load(t.Name())
	if !ok {
		if err := topicstore.Define(ctx, p.rdb, keyspace.TopicsKey(p.prefix), t); err != nil {
			return err
		}
		s, _, err := life.Read(ctx, p.rdb, p.prefix, t.Name())
		if err != nil && !errors.Is(err, life.ErrInvalidSettings) {
			return err
		}
		d := &definedTopic{def: t.Definition()}
		now := time.Now().UnixNano()
		d.checked.Store(now)
		d.events.Store(int64(s.Events))
		d.lifeChecked.Store(now)
		p.defined.LoadOrStore(t.Name(), d)
		return nil
	}
	d := v.(*definedTopic)
	if d.def != t.Definition() {
		return fmt.Errorf("%w: %s is %s, given as %s", topic.ErrConflict, t.Name(), d.def, t.Definition())
	}
	p.recheckLife(ctx, t, d)
	last, now := d.checked.Load(), time.Now().UnixNano()
	if now-last < int64(p.redefineEvery) || !d.checked.CompareAndSwap(last, now) {
		return nil
	}
	if err := p.recheck(ctx, t); err != nil {
		d.checked.CompareAndSwap(now, last) // the next send tries again
		return err
	}
	return nil
}

// recheck reads the stored definition (one HGET while it is there) and
// stores it again when it is gone.
func (p *Producer) recheck(ctx context.Context, t topic.Topic) error {
	key := keyspace.TopicsKey(p.prefix)
	stored, found, err := topicstore.Lookup(ctx, p.rdb, key, t.Name())
	switch {
	case err != nil:
		return err
	case !found:
		return topicstore.Define(ctx, p.rdb, key, t)
	case stored.Definition() != t.Definition():
		return fmt.Errorf("%w: %s is stored as %s, defined here as %s", topic.ErrConflict, t.Name(), stored.Definition(), t.Definition())
	}
	return nil
}

// recheckLife reads t's lifecycle settings again when lifeRecheckInterval
// passed, by the one send that finds it over. A failed read keeps what was
// read before (the next send tries again): a setting is not worth failing
// a send for.
func (p *Producer) recheckLife(ctx context.Context, t topic.Topic, d *definedTopic) {
	last, now := d.lifeChecked.Load(), time.Now().UnixNano()
	if now-last < int64(lifeRecheckInterval) || !d.lifeChecked.CompareAndSwap(last, now) {
		return
	}
	s, _, err := life.Read(ctx, p.rdb, p.prefix, t.Name())
	switch {
	case err == nil:
		d.events.Store(int64(s.Events))
	case !errors.Is(err, life.ErrInvalidSettings):
		d.lifeChecked.CompareAndSwap(now, last)
	}
}

// events returns the event log length the sends to the topic named name
// record "sent" with (0: none), as define last read it.
func (p *Producer) events(name string) int64 {
	if v, ok := p.defined.Load(name); ok {
		return v.(*definedTopic).events.Load()
	}
	return 0
}
