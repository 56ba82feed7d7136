package engine

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// The engine's tests are not parallel: waitFetchersAsleep counts every
// fetcher of the test binary, and goleak checks what each test left.
func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }

// newHub returns a hub on rdb under prefix, as rmq.New makes a client's,
// closed when the test ends (after the engines started later: cleanups
// run last first).
func newHub(t testing.TB, rdb redis.UniversalClient, prefix string) *Hub {
	h := NewHub(rdb, HubConfig{Prefix: prefix})
	t.Cleanup(h.Close)
	return h
}

// newEngine makes the engine of tp with listener l on a hub of its own
// under prefix (a test may still give it another hub before Start).
func newEngine(t testing.TB, rdb redis.UniversalClient, prefix string, tp topic.Topic, l consumer.MessageListener, opts ...consumer.Option) (*Engine, error) {
	return newHub(t, rdb, prefix).newEngine(tp, l, opts...)
}

// newPullEngine makes a pull engine of tp on a hub of its own under prefix.
func newPullEngine(t testing.TB, rdb redis.UniversalClient, prefix string, tp topic.Topic, onWake func(), opts ...consumer.Option) (*Engine, error) {
	return newHub(t, rdb, prefix).newPuller(tp, onWake, opts...)
}

// newEngine makes the engine of tp with listener l on h, as
// rmq.Client.Register does.
func (h *Hub) newEngine(tp topic.Topic, l consumer.MessageListener, opts ...consumer.Option) (*Engine, error) {
	s, err := TopicSettings(opts)
	if err != nil {
		return nil, err
	}
	return h.New(Params{Topic: tp, Listener: l, Settings: s})
}

// newPuller makes a pull engine of tp on h, as rmq.Client.Pull does.
func (h *Hub) newPuller(tp topic.Topic, onWake func(), opts ...consumer.Option) (*Engine, error) {
	s, err := TopicSettings(opts)
	if err != nil {
		return nil, err
	}
	return h.New(Params{Topic: tp, Settings: s, Pull: true, OnWake: onWake})
}

// newProducer is the producer of a client under prefix.
func newProducer(rdb redis.UniversalClient, prefix string) *producer.Producer {
	p, err := producer.New(rdb, producer.WithPrefix(prefix))
	if err != nil {
		panic(err) // the tests' prefixes are valid
	}
	return p
}

// fetcherRun is the fetcher's loop, whose one select is where it sleeps.
const fetcherRun = "github.com/rmq-go/rmq/internal/engine/fetcher.(*Fetcher).Run"

// waitFetchersAsleep waits until n fetchers run, every one of them parked
// in the select that ends its loop: the only place a fetcher sleeps, and
// it parks there only with no wake-up, release or timer pending. A message
// sent after it returns reaches them only through a wake-up (or their
// idle timer, a minute away). The engine tests are not parallel, so every
// fetcher of the test binary is the test's.
func waitFetchersAsleep(t testing.TB, n int) {
	t.Helper()
	redistest.WaitParked(t, fetcherRun, nil, n)
}
