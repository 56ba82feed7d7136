package producer

import (
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/options"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/slots"
)

// Option configures a producer made by New. Options are made by the With
// functions below only: the interface is sealed (its one method is
// unexported), so a program passes them on and keeps them in slices but
// cannot implement its own.
type Option interface{ producerOption }

// producerOption seals Option: only the internal options type implements
// it, so package rmq can add its client's observer and send hooks to its
// producer's options while no public signature names the internal type.
type producerOption = options.ProducerOption

// WithPrefix sets the Redis key prefix of every topic (default
// slots.DefaultPrefix). It must be the prefix of the topic's consumers
// (rmq.WithPrefix).
func WithPrefix(prefix string) Option {
	return options.ProducerFunc(func(s *options.Producer) { s.Prefix = prefix })
}

// WithMaxBodySize sets the largest body accepted, in bytes (default
// DefaultMaxBodySize; 0: the default). Larger ones fail with
// ErrBodyTooLarge before anything is written.
func WithMaxBodySize(n int) Option {
	return options.ProducerFunc(func(s *options.Producer) { s.MaxBodySize = n })
}

// New returns a producer on rdb, a *redis.Client or *redis.ClusterClient.
// It holds no goroutines and needs no Close. A program that also consumes
// takes its client's producer instead (rmq.Client.Producer): the client's
// options (rmq.WithPrefix, rmq.WithMaxBodySize) configure that one, and the
// client's observers and send hooks (rmq.WithObserver, rmq.WithSendHook)
// see its sends, which they do not for a producer made here.
//
// New returns an error wrapping consumer.ErrInvalidOption (the same error
// as rmq.ErrInvalidOption) for a nil rdb, a nil option or a negative body
// size, and one wrapping slots.ErrInvalidPrefix for a bad prefix.
func New(rdb redis.UniversalClient, opts ...Option) (*Producer, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil Redis client", consumer.ErrInvalidOption)
	}
	s := options.Producer{Prefix: slots.DefaultPrefix}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil producer option", consumer.ErrInvalidOption)
		}
		options.ApplyProducer(&s, o)
	}
	if err := slots.ValidatePrefix(s.Prefix); err != nil {
		return nil, err
	}
	switch {
	case s.MaxBodySize < 0:
		return nil, fmt.Errorf("%w: max body size %d", consumer.ErrInvalidOption, s.MaxBodySize)
	case s.MaxBodySize == 0:
		s.MaxBodySize = DefaultMaxBodySize
	}
	_, single := rdb.(*redis.Client)
	p := &Producer{
		rdb: rdb, prefix: s.Prefix, maxBodySize: s.MaxBodySize, notify: s.Notify,
		wakeCmd: scripts.WakeCommand(rdb), merged: single, redefineEvery: redefineInterval,
	}
	p.gc = newGroupCommit(p)
	return p, nil
}
