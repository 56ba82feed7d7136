package pull

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/lifecycle"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/forward"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
)

// QueueSlots is the slot amount of the topics rmqd creates. One slot keeps
// a queue in one sorted set, so jobs come out in publish order across
// every rmqd process, as an lmstfy queue (one Redis list) does; many
// queues still spread over a cluster's masters.
const QueueSlots = 1

// Pool is one Redis (a node or a cluster) with the RMQ client that serves
// its queues. The default pool also holds tokens and limits.
type Pool struct {
	Name   string
	Rdb    redis.UniversalClient
	prefix string
	Client *rmq.Client
	prod   *producer.Producer
	pub    *publisher
	Insp   *rmq.Inspector
	Watch  *queueWatch // long polls on queues that do not exist yet
	Rounds *pullRounds // consumes gathered into shared Pulls

	loops *lifecycle.Group // releaseIdle; nil until the pool started

	topics sync.Map // topic name -> topic.Topic; definitions never change
	long   sync.Map // hashed topic names already remembered

	Forwards []*forward.Forward // --forward of this pool's queues (../forward/forward.go)
}

// NewPool starts the pool's RMQ client with the forwards of its queues as
// its only listeners (../forward/forward.go); redact hides passwords in their errors.
// pullIdle is how long a queue nobody consumes keeps its pull engine.
func NewPool(ctx context.Context, name string, rdb redis.UniversalClient, prefix string, pullIdle time.Duration, log *slog.Logger,
	forwards []forward.Spec, redact func(string) string, extra ...rmq.Option) (*Pool, error) {
	c, err := rmq.New(rdb, append([]rmq.Option{rmq.WithPrefix(prefix), rmq.WithLogger(log.With("pool", name))}, extra...)...)
	if err != nil {
		return nil, err
	}
	p := &Pool{Name: name, Rdb: rdb, prefix: prefix, Client: c, prod: c.Producer(), pub: NewPublisher(c.Producer()), Insp: c.Inspector()}
	// Listeners are registered before Start; pulls need a started client.
	if err := p.openForwards(ctx, forwards, log, redact); err != nil {
		_ = c.Close(ctx)
		return nil, fmt.Errorf("pool %s: %w", name, err)
	}
	if err := c.Start(ctx); err != nil {
		_ = p.Close(ctx) // a failed Start needs Close as much as a good one
		return nil, fmt.Errorf("pool %s: %w", name, err)
	}
	p.Watch = newQueueWatch(rdb, prefix, log.With("pool", name))
	p.Rounds = newPullRounds(p)
	if pullIdle <= 0 {
		pullIdle = defaultPullIdle
	}
	p.loops = lifecycle.NewGroup(context.Background())
	plog := log.With("pool", name)
	p.loops.Go("rmqd release idle pulls", func(ctx context.Context) { p.releaseIdle(ctx, pullIdle, plog) })
	return p, nil
}

// defaultPullIdle is how long the pull engine of a queue nobody consumes is
// kept (its wake-up subscription, its place in the sweeper).
const defaultPullIdle = time.Minute

// releaseIdle closes, every half idle, the pull engines of queues no
// consume has used for idle: consumes of many queues, each once, leave
// nothing behind.
func (p *Pool) releaseIdle(ctx context.Context, idle time.Duration, log *slog.Logger) {
	t := time.NewTicker(idle / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := p.Client.ReleaseIdlePulls(ctx, idle); err != nil && ctx.Err() == nil {
			log.WarnContext(ctx, "rmqd: releasing idle pull engines", "err", err)
		}
	}
}

// ErrTypeConflict: a publish named another type than the queue has.
var ErrTypeConflict = errors.New("rmqd: queue has another type")

// lookup returns the stored definition of a topic; found is false for a
// queue never published to.
func (p *Pool) lookup(ctx context.Context, name string) (topic.Topic, bool, error) {
	if t, ok := p.topics.Load(name); ok {
		return t.(topic.Topic), true, nil
	}
	t, err := p.Insp.Topic(ctx, name)
	if errors.Is(err, rmq.ErrUnknownTopic) {
		return topic.Topic{}, false, nil
	}
	if err != nil {
		return topic.Topic{}, false, err
	}
	p.topics.Store(name, t)
	return t, true, nil
}

// LookupAll is lookup for several names at once: the cached ones from
// memory, the rest with one HMGET of the definitions hash, so a consume
// naming many queues never published to costs one read, not one each.
// found[i] tells whether names[i] exists.
func (p *Pool) LookupAll(ctx context.Context, names []string) (ts []topic.Topic, found []bool, err error) {
	ts, found = make([]topic.Topic, len(names)), make([]bool, len(names))
	var unknown []int
	for i, name := range names {
		if t, ok := p.topics.Load(name); ok {
			ts[i], found[i] = t.(topic.Topic), true
		} else {
			unknown = append(unknown, i)
		}
	}
	if len(unknown) == 0 {
		return ts, found, nil
	}
	fields := make([]string, len(unknown))
	for k, i := range unknown {
		fields[k] = names[i]
	}
	vals, err := p.Rdb.HMGet(ctx, keyspace.TopicsKey(p.prefix), fields...).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("look up queues: %w", err)
	}
	for k, v := range vals {
		def, ok := v.(string)
		if !ok {
			continue // nil: never published to
		}
		i := unknown[k]
		t, err := topic.ParseDefinition(names[i], def)
		if err != nil {
			return nil, nil, fmt.Errorf("look up queue %s: %w", names[i], err)
		}
		p.topics.Store(names[i], t)
		ts[i], found[i] = t, true
	}
	return ts, found, nil
}

// QueueTopic is the topic of (ns, q) for reading: the stored one, or, for a
// queue never published to, a FixedTime topic (lmstfy's kind).
func (p *Pool) QueueTopic(ctx context.Context, ns, q string) (topic.Topic, bool, error) {
	name := names.TopicName(ns, q)
	t, found, err := p.lookup(ctx, name)
	if err != nil || found {
		return t, found, err
	}
	t, err = topic.New(name, topic.FixedTime, QueueSlots)
	return t, false, err
}

// PublishTopic is the topic a publish to (ns, q) goes to. want 0 takes the
// queue's type (FixedTime for a new queue); another type than the stored
// one is errTypeConflict.
func (p *Pool) PublishTopic(ctx context.Context, ns, q string, want topic.Type) (topic.Topic, error) {
	name := names.TopicName(ns, q)
	t, found, err := p.lookup(ctx, name)
	if err != nil {
		return topic.Topic{}, err
	}
	if found {
		if want != 0 && t.Type() != want {
			return topic.Topic{}, fmt.Errorf("%w: %s", ErrTypeConflict, t.Type())
		}
		return t, nil
	}
	if want == 0 {
		want = topic.FixedTime
	}
	if names.IsLongTopicName(name) {
		if _, done := p.long.Load(name); !done {
			if err := p.Rdb.HSetNX(ctx, p.longNamesKey(), name, ns+"/"+q).Err(); err != nil {
				return topic.Topic{}, err
			}
			p.long.Store(name, struct{}{})
		}
	}
	return topic.New(name, want, QueueSlots)
}

// Defined caches a topic the producer has just stored, and wakes the long
// polls that wait for it to exist.
func (p *Pool) Defined(t topic.Topic) {
	if _, ok := p.topics.Load(t.Name()); !ok {
		if _, loaded := p.topics.LoadOrStore(t.Name(), t); !loaded && p.Watch != nil {
			p.Watch.defined(t.Name())
		}
	}
}

func (p *Pool) longNamesKey() string { return p.prefix + ":rmqd:longnames" }

// Queues returns namespace -> queue names of every topic rmqd made here.
func (p *Pool) Queues(ctx context.Context) (map[string][]string, error) {
	ts, err := p.Insp.Topics(ctx)
	if err != nil {
		return nil, err
	}
	long, err := p.Rdb.HGetAll(ctx, p.longNamesKey()).Result()
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, t := range ts {
		ns, q, ok := names.SplitTopicName(t.Name())
		if !ok && names.IsLongTopicName(t.Name()) {
			if v, known := long[t.Name()]; known {
				ns, q, ok = splitLong(v)
			}
		}
		if ok {
			out[ns] = append(out[ns], q)
		}
	}
	for ns := range out {
		sort.Strings(out[ns])
	}
	return out, nil
}

func splitLong(v string) (ns, q string, ok bool) {
	for i := 0; i < len(v); i++ {
		if v[i] == '/' {
			return v[:i], v[i+1:], true
		}
	}
	return "", "", false
}

// ReadySize counts the jobs a consume could take now (lmstfy's size):
// waiting and due; delayed, in-flight and dead ones are not counted.
func (p *Pool) ReadySize(ctx context.Context, t topic.Topic) (int64, error) {
	st, err := p.Insp.Stats(ctx, t)
	if err != nil {
		return 0, err
	}
	return st.Due, nil
}

// DeadSize counts the dead letter.
func (p *Pool) DeadSize(ctx context.Context, t topic.Topic) (int64, error) {
	pipe := p.Rdb.Pipeline()
	cmds := make([]*redis.IntCmd, t.SlotAmount())
	for i := range cmds {
		cmds[i] = pipe.ZCard(ctx, keyspace.KeysFor(p.prefix, t, i).Dead)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, nil
}

// DeadOldest returns the ids of up to n dead jobs, the one that died first
// first (lmstfy's dead letter is FIFO). The Inspector lists newest first,
// so this reads the dead sets directly: n per slot, merged by time of death.
func (p *Pool) DeadOldest(ctx context.Context, t topic.Topic, n int) ([]string, error) {
	pipe := p.Rdb.Pipeline()
	cmds := make([]*redis.ZSliceCmd, t.SlotAmount())
	for i := range cmds {
		cmds[i] = pipe.ZRangeWithScores(ctx, keyspace.KeysFor(p.prefix, t, i).Dead, 0, int64(n-1))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var all []redis.Z
	for _, c := range cmds {
		all = append(all, c.Val()...)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Score < all[j].Score })
	if len(all) > n {
		all = all[:n]
	}
	ids := make([]string, len(all))
	for i, z := range all {
		ids[i] = z.Member.(string)
	}
	return ids, nil
}

// ReadyIDs returns up to n ids of waiting jobs that are due now, in the
// order consumers take them.
func (p *Pool) ReadyIDs(ctx context.Context, t topic.Topic, n int) ([]rmq.WaitingMessage, error) {
	ws, err := p.Insp.Peek(ctx, t, n)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	for i, w := range ws {
		if t.Type().TimeBased() && w.DueAt.After(now) {
			return ws[:i], nil
		}
	}
	return ws, nil
}

// Close stops the client, whose Close waits for the forwards in progress,
// then each forward (the publishes it left behind, then its broker
// connection).
func (p *Pool) Close(ctx context.Context) error {
	if p.loops != nil { // started (a failed Start closes the pool before)
		p.loops.Stop()
		p.Watch.close()
	}
	err := p.Client.Close(ctx)
	return errors.Join(err, p.closeForwards(ctx))
}
