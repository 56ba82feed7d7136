package engine

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/options"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

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
	return producer.New(rdb, options.Producer{Prefix: prefix})
}
