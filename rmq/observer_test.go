package rmq_test

import (
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
	skip   string // a topic it leaves unobserved
	topics []string
}

func (l *eventLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	*l.events = append(*l.events, l.name+" "+fmt.Sprintf(format, args...))
}

func (l *eventLog) Sent(t topic.Topic, r producer.SendResult) { l.add("sent %s %s", t.Name(), r) }

func (l *eventLog) Removed(t topic.Topic, removed bool) { l.add("removed %s %v", t.Name(), removed) }

func (l *eventLog) ConsumerObserver(t topic.Topic) consumer.Observer {
	l.topics = append(l.topics, t.Name())
	if t.Name() == l.skip {
		return nil
	}
	return topicLog{l}
}

type topicLog struct{ l *eventLog }

func (o topicLog) Delivered(m *consumer.Message) { o.l.add("delivered %s %s", m.Topic, m.ID) }

func (o topicLog) Finished(m *consumer.Message, _ time.Duration, out consumer.Outcome) {
	o.l.add("finished %s %s %s", m.Topic, m.ID, out)
}

func (o topicLog) LeasesExpired(string, int, int) {}

// finishedThen closes done once its delivery finished.
type finishedThen struct {
	topicLog
	done chan struct{}
}

func (o finishedThen) Finished(m *consumer.Message, took time.Duration, out consumer.Outcome) {
	o.topicLog.Finished(m, took, out)
	close(o.done)
}

// Every observer given with WithObserver is told of the producer's sends and
// removals and of each consumer's deliveries, in the order given, before a
// consumer.WithObserver of Register; ConsumerObserver is asked once per
// registered topic, and a nil answer leaves that topic to the others.
func TestWithObserverTellsEveryObserverInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	var (
		mu     sync.Mutex
		events []string
	)
	a := &eventLog{name: "a", mu: &mu, events: &events}
	b := &eventLog{name: "b", mu: &mu, events: &events, skip: "quiet"}
	c := e.client(rmq.WithObserver(a), rmq.WithObserver(b))
	jobs := mustTopic(t, "jobs", topic.Priority, 1)
	quiet := mustTopic(t, "quiet", topic.Priority, 1)
	handled := make(chan struct{})
	r := &eventLog{name: "r", mu: &mu, events: &events}
	require.NoError(t, c.Register(jobs, consumer.ListenerFunc(ack), consumer.WithObserver(finishedThen{topicLog{r}, handled})))
	require.NoError(t, c.Register(quiet, consumer.ListenerFunc(ack)))
	assert.Equal(t, []string{"jobs", "quiet"}, a.topics)
	assert.Equal(t, []string{"jobs", "quiet"}, b.topics)

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

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{
		"a sent jobs stored", "b sent jobs stored",
		"a sent quiet stored", "b sent quiet stored",
		"a removed quiet true", "b removed quiet true",
		"a delivered jobs j1", "b delivered jobs j1", "r delivered jobs j1",
		"a finished jobs j1 acked", "b finished jobs j1 acked", "r finished jobs j1 acked",
	}, events)
}

// A nil observer is refused by New.
func TestWithObserverNil(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := rmq.New(e.rdb, rmq.WithPrefix(e.prefix), rmq.WithObserver(nil))
	assert.True(t, errors.Is(err, rmq.ErrInvalidOption), "got %v", err)
}
