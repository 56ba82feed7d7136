package options

import (
	"context"

	"github.com/rmq-go/rmq/topic"
)

// Producer is what a producer is made with (producer.New): the settings of
// sending, set by producer.Option; a client's producer has them from
// rmq.Option.
type Producer struct {
	// Prefix is the Redis key prefix of every topic.
	Prefix string
	// MaxBodySize is the largest body accepted, in bytes; 0 or less: the
	// default (producer.DefaultMaxBodySize).
	MaxBodySize int
	// Notify, when not nil, is told of every send and removal.
	Notify SendNotifier
}

// SendNotifier is the client's side of a producer's sends: its send hooks
// (rmq.WithSendHook) and its observer's Sent and Removed (rmq.Observer).
type SendNotifier interface {
	// Before runs once per message, after it was validated and before it
	// is written, on the sending goroutine. It returns the message's
	// headers (the hooks may have added some; nil: none) and, when not
	// nil, what to call once the write ended, with the id or the error.
	Before(ctx context.Context, t topic.Topic, key string, body []byte, headers map[string]string) (map[string]string, func(id string, err error))
	// Sent is told what a send did (a producer.SendResult).
	Sent(t topic.Topic, result int)
	// Removed is told whether a remove found its message.
	Removed(t topic.Topic, removed bool)
}

// FlowNotifier is an optional extension of SendNotifier: it is told of
// every flow producer.SendFlow wrote (nodes: the messages of the tree, the
// root included).
type FlowNotifier interface {
	FlowSent(root topic.Topic, nodes int)
}

// ProducerOption is what producer.Option is: sealed as TopicOption is (its
// one method is unexported here), so a program holds the producer's public
// options and package rmq adds the client's notifier (WithNotify), both
// checked by the compiler, while no public signature names this package.
type ProducerOption interface{ applyProducer(*Producer) }

// ProducerFunc is a producer option: it writes into a producer's settings.
type ProducerFunc func(*Producer)

func (f ProducerFunc) applyProducer(s *Producer) { f(s) }

// ApplyProducer applies o to s; o is not nil (the caller checks).
func ApplyProducer(s *Producer, o ProducerOption) { o.applyProducer(s) }

// WithNotify is the option by which package rmq gives its client's
// producer the client's send hooks and observer.
func WithNotify(n SendNotifier) ProducerOption {
	return ProducerFunc(func(s *Producer) { s.Notify = n })
}
