package rmq_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// eventLog is a client observer that writes every event it is told, as a
// line, to a log shared by several observers, so the order between them
// shows.
type eventLog struct {
	name   string
	mu     *sync.Mutex
	events *[]string
	done   chan struct{} // closed once a delivery finished (nil: none)
}

func (l *eventLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	*l.events = append(*l.events, l.name+" "+fmt.Sprintf(format, args...))
}

func (l *eventLog) Sent(t topic.Topic, r producer.SendResult) { l.add("sent %s %s", t.Name(), r) }

func (l *eventLog) Removed(t topic.Topic, removed bool) { l.add("removed %s %v", t.Name(), removed) }

func (l *eventLog) Delivered(m *consumer.Message) { l.add("delivered %s %s", m.Topic, m.ID) }

func (l *eventLog) Finished(m *consumer.Message, _ time.Duration, out consumer.Outcome, err error) {
	l.add("finished %s %s %s %v", m.Topic, m.ID, out, err)
	if l.done != nil {
		close(l.done)
	}
}

func (l *eventLog) LeasesExpired(string, int, int) {}

// pauseLog implements only the PauseObserver extension besides the base.
type pauseLog struct {
	rmq.BaseObserver
	paused chan string
}

func (p pauseLog) Paused(topic string, paused bool) { p.paused <- fmt.Sprint(topic, " ", paused) }

// Every observer given with WithObserver is told of the producer's sends and
// removals and of every consumer's deliveries, in the order given, with the
// listener's error; an observer with an optional extension is told of
// those events too.
func TestWithObserverTellsEveryObserverInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	var (
		mu     sync.Mutex
		events []string
	)
	handled := make(chan struct{})
	a := &eventLog{name: "a", mu: &mu, events: &events}
	b := &eventLog{name: "b", mu: &mu, events: &events, done: handled}
	pauses := pauseLog{paused: make(chan string, 4)}
	c := e.client(rmq.WithObserver(a), rmq.WithObserver(b), rmq.WithObserver(pauses))
	jobs := mustTopic(t, "jobs", topic.Priority, 1)
	quiet := mustTopic(t, "quiet", topic.Priority, 1)
	require.NoError(t, c.Register(jobs, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		return errors.New("boom")
	}), consumer.WithMaxRetries(0)))
	require.NoError(t, c.Register(quiet, consumer.ListenerFunc(ack)))

	p := c.Producer()
	_, err := p.SendPriority(ctx, jobs, []byte("x"), 100, producer.WithKey("j1"))
	require.NoError(t, err)
	_, err = p.SendPriority(ctx, quiet, []byte("y"), 100, producer.WithKey("q1"))
	require.NoError(t, err)
	removed, err := p.Remove(ctx, quiet, "q1")
	require.NoError(t, err)
	require.Equal(t, producer.RemovedWaiting, removed)
	e.start(c)
	select {
	case <-handled:
	case <-time.After(waitLong):
		t.Fatal("j1 was not handled")
	}
	require.NoError(t, c.Inspector().Pause(ctx, quiet))
	select {
	case got := <-pauses.paused:
		assert.Equal(t, "quiet true", got)
	case <-time.After(waitLong):
		t.Fatal("the pause was not observed")
	}

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{
		"a sent jobs stored", "b sent jobs stored",
		"a sent quiet stored", "b sent quiet stored",
		"a removed quiet true", "b removed quiet true",
		"a delivered jobs j1", "b delivered jobs j1",
		"a finished jobs j1 dead boom", "b finished jobs j1 dead boom",
	}, events)
}

// A nil observer is refused by New.
func TestWithObserverNil(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := rmq.New(e.rdb, rmq.WithPrefix(e.prefix), rmq.WithObserver(nil))
	assert.True(t, errors.Is(err, rmq.ErrInvalidOption), "got %v", err)
}
