package options

import (
	"context"

	"github.com/rmq-go/rmq/topic"
)

// Producer is what a client's producer is made with (producer.New, which
// only package rmq calls): the client-scope settings of sending, set by
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
