package rmq_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// faultRun is a consumer and a producer at work on a cluster of the test's
// own: the producer sends messages due now (or soon), as long as fewer
// than 256 sent are not handled yet, and records every send Redis
// acknowledged; the listener records every id it handled.
type faultRun struct {
	e    *env
	tp   topic.Topic
	c    *rmq.Client
	stop chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	acked   map[string]bool
	failed  int
	handled map[string]int
	retried int
	pace    chan struct{} // a place per send not yet handled
}

// handledCount is how many distinct messages the run has handled.
func (r *faultRun) handledCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.handled)
}

// waitHandled waits until the run has handled n more messages than now:
// traffic flows.
func (r *faultRun) waitHandled(t *testing.T, n int) {
	t.Helper()
	want := r.handledCount() + n
	require.Eventually(t, func() bool { return r.handledCount() >= want }, waitLong, 10*time.Millisecond,
		"the run handled fewer than %d more messages", n)
}

func startFaultRun(t *testing.T, e *env, tp topic.Topic) *faultRun {
	t.Helper()
	r := &faultRun{e: e, tp: tp, stop: make(chan struct{}), acked: map[string]bool{}, handled: map[string]int{}, pace: make(chan struct{}, 256)}
	r.c = e.client()
	require.NoError(t, r.c.Register(tp, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		r.mu.Lock()
		r.handled[m.ID]++
		if r.handled[m.ID] == 1 {
			select {
			case <-r.pace: // its send's place
			default: // sent but not acknowledged: it took no place back yet
			}
		}
		if m.Attempt > 1 {
			r.retried++
		}
		r.mu.Unlock()
		return nil
	}), consumer.WithConcurrency(16), consumer.WithPrepareTimeout(2*time.Second),
		consumer.WithSweepInterval(200*time.Millisecond), consumer.WithRetryBackoff(noBackoff)))
	e.start(r.c)
	p := r.c.Producer()
	for g := range 4 {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-r.stop:
					return
				default:
				}
				// At most pace sends not yet handled: the load follows
				// the consumer, without piling up.
				select {
				case r.pace <- struct{}{}:
				case <-r.stop:
					return
				}
				id := fmt.Sprintf("g%d-%d", g, i)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				due := time.Now().Add(time.Duration(i%5) * 50 * time.Millisecond)
				_, err := p.SendFixedTime(ctx, tp, []byte(id), due, producer.WithKey(id))
				cancel()
				r.mu.Lock()
				if err == nil {
					r.acked[id] = true
				} else {
					r.failed++
					<-r.pace // never handled: its place is free again
				}
				r.mu.Unlock()
			}
		}()
	}
	return r
}

// finish stops the producer and checks that every acknowledged send was
// handled and that the topic's keys are empty: nothing left in store,
// prepare or dead.
func (r *faultRun) finish(t *testing.T) {
	t.Helper()
	close(r.stop)
	r.wg.Wait()
	redistest.PollWithin(t, 30*time.Second, func() error {
		r.mu.Lock()
		var missing []string
		for id := range r.acked {
			if r.handled[id] == 0 {
				missing = append(missing, id)
			}
		}
		r.mu.Unlock()
		if len(missing) > 0 {
			sort.Strings(missing)
			return fmt.Errorf("%d acknowledged sends never handled, e.g. %v", len(missing), missing[:min(10, len(missing))])
		}
		return nil
	})
	r.e.eventuallyCounts(r.tp, counts{})
	r.mu.Lock()
	defer r.mu.Unlock()
	t.Logf("%d sends acknowledged, %d failed (not acknowledged), %d handled ids, %d redeliveries",
		len(r.acked), r.failed, len(r.handled), r.retried)
	require.NotEmpty(t, r.acked)
}
