package rmq

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/inspect"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

var (
	// ErrUnknownTopic is returned by Inspector.Topic for a name with no
	// stored definition.
	ErrUnknownTopic = inspect.ErrUnknownTopic
	// ErrMessageNotFound is returned by Inspector.Message when no message
	// has the id, and by Inspector.DeadMessage when no dead message has it.
	ErrMessageNotFound = inspect.ErrMessageNotFound
	// ErrInvalidCursor is returned for a cursor that is not one a listing
	// returned for the same topic.
	ErrInvalidCursor = inspect.ErrInvalidCursor
	// ErrInvalidPageSize is returned for a page size outside
	// 1..MaxListLimit.
	ErrInvalidPageSize = inspect.ErrInvalidPageSize
	// ErrInvalidLimit is ErrInvalidPageSize.
	//
	// Deprecated: use ErrInvalidPageSize; the name read as if it were about
	// flow control's limits (ErrInvalidLimits).
	ErrInvalidLimit = ErrInvalidPageSize
)

// Inspector reads and repairs the queues of every topic under one key
// prefix: statistics, waiting messages, and the dead queue (list, show,
// requeue, delete). It needs no listener and starts no goroutine; it is
// safe for concurrent use. Every change it makes is one Lua script per topic
// slot, so it can run next to live producers and consumers.
//
// Its Redis work is internal/inspect's; it converts that package's results
// to this one's types.
type Inspector struct {
	in     *inspect.Inspector
	rdb    redis.UniversalClient
	prefix string
	err    error // a configuration error, returned by every call
}

// Inspector returns an inspector on the client's Redis and key prefix.
func (c *Client) Inspector() *Inspector { return newInspector(c.rdb, c.cfg.prefix, nil) }

// NewInspector returns an inspector on rdb (a *redis.Client or
// *redis.ClusterClient) that needs no client. Its one option is the key
// prefix (WithPrefix; default "rmq"); see InspectorOption. A nil rdb, a nil
// option or a bad prefix is reported by every later call.
func NewInspector(rdb redis.UniversalClient, opts ...InspectorOption) *Inspector {
	cfg := inspectorConfig{prefix: slots.DefaultPrefix}
	var bad error
	for _, o := range opts {
		if o == nil {
			bad = fmt.Errorf("%w: nil inspector option", ErrInvalidOption)
			continue
		}
		o.applyInspector(&cfg)
	}
	if rdb == nil {
		bad = fmt.Errorf("%w: nil Redis client", ErrInvalidOption)
	}
	return newInspector(rdb, cfg.prefix, bad)
}

// newInspector returns an inspector on rdb under prefix; bad, when not nil,
// is returned by every call (else a bad prefix is).
func newInspector(rdb redis.UniversalClient, prefix string, bad error) *Inspector {
	in := inspect.New(rdb, prefix, bad)
	return &Inspector{in: in, rdb: rdb, prefix: prefix, err: in.Err()}
}

// Prefix returns the key prefix the inspector reads.
func (i *Inspector) Prefix() string { return i.prefix }

// Topics returns every topic defined under the prefix (producers and
// consumers store a topic's definition on first use), sorted by name.
func (i *Inspector) Topics(ctx context.Context) ([]topic.Topic, error) {
	return i.in.Topics(ctx)
}

// Topic returns the stored definition of the topic called name, or
// ErrUnknownTopic.
func (i *Inspector) Topic(ctx context.Context, name string) (topic.Topic, error) {
	return i.in.Topic(ctx, name)
}

// Remove deletes a message and its body wherever it waits or runs, like
// Producer.Remove (which also says where it was): it returns false when no
// message with that id waits or is in flight (unknown, or dead: see
// DeleteDead).
func (i *Inspector) Remove(ctx context.Context, t topic.Topic, id string) (bool, error) {
	if err := i.in.Check(ctx, t); err != nil {
		return false, err
	}
	p, err := producer.New(i.rdb, producer.WithPrefix(i.prefix))
	if err != nil {
		return false, err
	}
	r, err := p.Remove(ctx, t, id)
	return r != producer.NotFound, err
}
