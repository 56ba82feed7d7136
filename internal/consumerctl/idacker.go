package consumerctl

import (
	"context"

	"github.com/rmq-go/rmq/topic"
)

// IDAcker is implemented by the Shared that package consumer makes: an ack
// by id (rmq.Client.AckByID) rides the same ack rounds as the engines'
// acks, so acks of every topic of a client share script calls.
type IDAcker interface {
	// AckByID acks whatever delivery of id is current in slot of t (keys
	// under prefix), unfenced, and reports whether one was acked: false
	// for an id that is nowhere and for one refused (dead-lettered, or
	// removed while in flight).
	AckByID(ctx context.Context, prefix string, t topic.Topic, slot int, id string) (bool, error)
}
