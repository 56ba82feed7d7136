package rmq_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// lifeObserver records the outcome of every delivery by id and attempt.
type lifeObserver struct {
	mu  sync.Mutex
	out map[string]map[int]consumer.Outcome
}

func (*lifeObserver) Sent(topic.Topic, producer.SendResult) {}
func (*lifeObserver) Removed(topic.Topic, bool)             {}
func (*lifeObserver) Delivered(*consumer.Message)           {}
func (*lifeObserver) LeasesExpired(string, int, int)        {}
func (o *lifeObserver) Finished(m *consumer.Message, _ time.Duration, out consumer.Outcome, _ error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.out[m.ID] == nil {
		o.out[m.ID] = map[int]consumer.Outcome{}
	}
	o.out[m.ID][m.Attempt] = out
}

// validLife checks the events of one message, in their order, against
// the life a message can have: sent (if logged) first; each attempt's
// delivered (if logged) before its end; every failed attempt retried once
// with its attempt number, 1, 2, ... in order; then exactly one end
// (completed or dead with the next attempt number; or expired, removed,
// cancelled) and nothing after it. Types it does not require (sent,
// delivered, expired, progress) are accepted where they fit.
func validLife(evs []rmq.Event) error {
	retried, delivered := 0, 0
	end := rmq.EventType("")
	for i, ev := range evs {
		if end != "" {
			return fmt.Errorf("event %d (%s #%d) after its end (%s)", i, ev.Type, ev.Attempt, end)
		}
		switch ev.Type {
		case rmq.EventSent:
			if retried > 0 || delivered > 0 {
				return fmt.Errorf("event %d: sent after a delivery", i)
			}
		case rmq.EventDelivered:
			if ev.Attempt != retried+1 || ev.Attempt <= delivered {
				return fmt.Errorf("event %d: delivered #%d after %d retried, %d delivered", i, ev.Attempt, retried, delivered)
			}
			delivered = ev.Attempt
		case rmq.EventProgress:
		case rmq.EventRetried:
			if ev.Attempt != retried+1 {
				return fmt.Errorf("event %d: retried #%d after %d retried", i, ev.Attempt, retried)
			}
			retried++
		case rmq.EventCompleted, rmq.EventDead:
			if ev.Attempt != retried+1 {
				return fmt.Errorf("event %d: %s #%d after %d retried", i, ev.Type, ev.Attempt, retried)
			}
			end = ev.Type
		case rmq.EventExpired, rmq.EventRemoved, rmq.EventCancelled:
			end = ev.Type
		default:
			return fmt.Errorf("event %d: unknown type %q", i, ev.Type)
		}
	}
	if end == "" {
		return errors.New("no end")
	}
	return nil
}

// Every event of every message exactly once and in order across a Redis
// kill -9 and restart from its AOF (appendfsync always): a consumer handles
// messages, some failing attempts, some in flight during the kill; a
// follower reads the log all along. Afterwards the whole log (Events from
// "0") holds a valid life per message, one completed per acked delivery
// (and at its attempt), a retried or dead event for every attempt a handler
// failed; and the follower, resuming from its cursor across the restart,
// saw exactly the log: no event twice, none missing.
func TestLifeEventsExactlyOnceAcrossRedisKill(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redisserver.Config{AppendOnly: true, AppendFsync: "always"})
	e := newEnvOn(t, srv)
	ctx := ctxT(t)
	tp := mustTopic(t, "lifeaof", topic.FixedTime, 2)
	obs := &lifeObserver{out: map[string]map[int]consumer.Outcome{}}
	c := e.client(rmq.WithObserver(obs))
	require.NoError(t, c.Inspector().SetLifecycle(ctx, tp, rmq.Lifecycle{Retention: time.Hour, Events: 100_000}))

	// A body "f<k>" fails its first k attempts (k = 3 goes dead: two
	// retries); "h" is held until released, so it is in flight during the
	// kill.
	release := make(chan struct{})
	held := make(chan string, 100)
	var mu sync.Mutex
	failed := map[string][]int{} // attempts a handler failed
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(hctx context.Context, m *consumer.Message) error {
		if string(m.Body) == "h" {
			held <- m.ID
			select {
			case <-release:
			case <-hctx.Done():
				return hctx.Err()
			}
			return m.SetResult([]byte("r-" + m.ID))
		}
		k, _ := strconv.Atoi(strings.TrimPrefix(string(m.Body), "f"))
		if m.Attempt <= k {
			mu.Lock()
			failed[m.ID] = append(failed[m.ID], m.Attempt)
			mu.Unlock()
			return errors.New("fail " + strconv.Itoa(m.Attempt))
		}
		return m.SetResult([]byte("r-" + m.ID))
	}), consumer.WithMaxRetries(2), consumer.WithRetryBackoff(func(int) time.Duration { return 0 }),
		consumer.WithPrepareTimeout(3*time.Second), consumer.WithSweepInterval(200*time.Millisecond)))
	e.start(c)

	// The follower: from "0", resuming from its last cursor whenever its
	// sequence ends (Redis down), until rctx ends.
	rctx, stopReader := context.WithCancel(ctx)
	var rmu sync.Mutex
	var seen []rmq.Event
	ends := map[string]bool{}
	progressed := make(chan struct{}, 1)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		after := "0"
		for rctx.Err() == nil {
			for ev, err := range c.Events(rctx, tp, after) {
				if err != nil {
					break // resume from after
				}
				rmu.Lock()
				seen = append(seen, ev)
				if ev.Type == rmq.EventCompleted || ev.Type == rmq.EventDead {
					ends[ev.MessageID] = true
				}
				rmu.Unlock()
				after = ev.Cursor
				select {
				case progressed <- struct{}{}:
				default:
				}
			}
			select { // a pause between resumptions while Redis is down
			case <-rctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	endsSeen := func() int { rmu.Lock(); defer rmu.Unlock(); return len(ends) }
	waitEnds := func(n int) {
		t.Helper()
		deadline := time.After(waitLong)
		for endsSeen() < n {
			select {
			case <-progressed:
			case <-deadline:
				t.Fatalf("the follower saw %d ends, want %d", endsSeen(), n)
			}
		}
	}

	bodies := map[string]string{}
	send := func(from, to int, hold bool) {
		for i := from; i < to; i++ {
			id := "m" + strconv.Itoa(i)
			body := "f" + strconv.Itoa(i%4)
			if hold && i%5 == 4 {
				body = "h"
			}
			bodies[id] = body
			_, err := c.Producer().SendFixedTime(ctx, tp, []byte(body), time.Now().Add(-time.Second), producer.WithKey(id))
			require.NoError(t, err)
		}
	}
	send(0, 60, true)
	for range 12 {
		select {
		case <-held:
		case <-time.After(waitLong):
			t.Fatal("the held messages did not all run")
		}
	}
	waitEnds(10)

	require.NoError(t, srv.Kill())
	rmu.Lock()
	beforeKill := len(seen)
	rmu.Unlock()
	require.NoError(t, srv.Restart(ctx))
	close(release)
	send(60, 120, false)
	waitEnds(120)
	stopReader()
	<-readerDone

	// The whole log, read from "0" by a new follower.
	var total int64
	for slot := range tp.SlotAmount() {
		n, err := e.rdb.XLen(ctx, keyspace.LifeKeysFor(e.prefix, tp.Name(), slot).Events).Result()
		require.NoError(t, err)
		total += n
	}
	var log []rmq.Event
	lctx, stopLog := context.WithCancel(ctx)
	for ev, err := range c.Events(lctx, tp, "0") {
		require.NoError(t, err)
		log = append(log, ev)
		if int64(len(log)) == total {
			break
		}
	}
	stopLog()
	types := map[rmq.EventType]int{}
	for _, ev := range log {
		types[ev.Type]++
	}
	t.Logf("%d events (%v), %d seen by the follower before the kill", len(log), types, beforeKill)
	require.Greater(t, beforeKill, 0, "events before the kill")
	require.Greater(t, len(seen), beforeKill, "events after the restart")

	// The follower saw the log: every event once, none missing. A cursor
	// names the position in every slot's log, so one event read by two
	// followers has two cursors: an event is known by what it says.
	eventKey := func(ev rmq.Event) string {
		return fmt.Sprintf("%s %s #%d at %d", ev.MessageID, ev.Type, ev.Attempt, ev.Time.UnixMilli())
	}
	keys := map[string]int{}
	for _, ev := range seen {
		keys[eventKey(ev)]++
	}
	for _, ev := range log {
		k := eventKey(ev)
		assert.Equal(t, 1, keys[k], "the follower saw %s %d times", k, keys[k])
		delete(keys, k)
	}
	assert.Empty(t, keys, "the follower saw events the log does not hold")

	byID := map[string][]rmq.Event{}
	for _, ev := range log {
		byID[ev.MessageID] = append(byID[ev.MessageID], ev)
	}
	require.Len(t, byID, len(bodies), "every message has events")
	obs.mu.Lock()
	defer obs.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	for id := range bodies {
		evs := byID[id]
		if err := validLife(evs); err != nil {
			t.Errorf("%s (%s): %v: %s", id, bodies[id], err, lifeString(evs))
			continue
		}
		end := evs[len(evs)-1]
		for attempt, out := range obs.out[id] {
			if out == consumer.Acked {
				assert.Equal(t, rmq.EventCompleted, end.Type, "%s acked at #%d: %s", id, attempt, lifeString(evs))
				assert.Equal(t, attempt, end.Attempt, "%s: %s", id, lifeString(evs))
				assert.Equal(t, "r-"+id, string(end.Data))
			}
		}
		for _, attempt := range failed[id] {
			found := false
			for _, ev := range evs {
				found = found || (ev.Attempt == attempt && (ev.Type == rmq.EventRetried || ev.Type == rmq.EventDead))
			}
			assert.True(t, found, "%s failed #%d: %s", id, attempt, lifeString(evs))
		}
	}
}

// lifeString shows a message's events.
func lifeString(evs []rmq.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "%s#%d ", ev.Type, ev.Attempt)
	}
	return b.String()
}
