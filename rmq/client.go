package rmq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/engine"
	"github.com/rmq-go/rmq/internal/history"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/lifecycle"
	"github.com/rmq-go/rmq/internal/options"
	"github.com/rmq-go/rmq/internal/zkcoord"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

var (
	// ErrStarted is returned by Register after Start, and by a second Start.
	ErrStarted = errors.New("rmq: client already started")
	// ErrClosed is returned by calls on a closed client.
	ErrClosed = errors.New("rmq: client closed")
	// ErrNotStarted is returned by Pull before Start.
	ErrNotStarted = errors.New("rmq: client not started")
	// ErrDuplicateTopic is returned when a topic is registered twice.
	ErrDuplicateTopic = errors.New("rmq: topic already registered")
	// ErrInvalidOption is returned by New for a bad client option and by
	// Register for a bad consumer option. It is consumer.ErrInvalidOption
	// under the name a caller of this package looks for, so one errors.Is
	// covers both scopes (the one alias of the public API, kept because
	// it is published).
	ErrInvalidOption = consumer.ErrInvalidOption
)

// Client owns a producer and the consumers of the registered topics.
type Client struct {
	rdb      redis.UniversalClient
	cfg      config
	log      *slog.Logger
	producer *producer.Producer
	coord    *zkcoord.Coordinator // nil without WithZooKeeper
	// hub is what the client's engines share (one subscription, one
	// sweeper, shared script calls); closed after them.
	hub *engine.Hub
	// obs fans out to the client's observers (WithObserver).
	obs *observers

	mu        sync.Mutex
	phase     lifecycle.Phase
	consumers []*engine.Engine
	topics    map[string]topic.Topic
	pulls     pullState       // pull engines, made on first Pull of a topic (pull.go)
	sched     clientScheduler // schedule_client.go
	waits     waitState       // life.go
}

// New returns a client on rdb, a *redis.Client or *redis.ClusterClient.
func New(rdb redis.UniversalClient, opts ...Option) (*Client, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil Redis client", ErrInvalidOption)
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", ErrInvalidOption)
		}
		o.applyClient(&cfg)
	}
	if err := slots.ValidatePrefix(cfg.prefix); err != nil {
		return nil, err
	}
	if cfg.logger == nil {
		return nil, fmt.Errorf("%w: nil logger", ErrInvalidOption)
	}
	if slices.Contains(cfg.observers, nil) {
		return nil, fmt.Errorf("%w: nil observer", ErrInvalidOption)
	}
	if cfg.maxBodySize < 0 {
		return nil, fmt.Errorf("%w: max body size %d", ErrInvalidOption, cfg.maxBodySize)
	}
	if cfg.history < 0 {
		return nil, fmt.Errorf("%w: history retention %v", ErrInvalidOption, cfg.history)
	}
	obs := &observers{list: cfg.observers, hooks: cfg.sendHooks}
	if cfg.history > 0 {
		obs.hist = &history.Observer{R: history.New(rdb, history.Config{Prefix: cfg.prefix, Retention: cfg.history,
			Interval: cfg.historyInterval, WorkerTTL: cfg.workerTTL, Logger: cfg.logger})}
		obs.list = append(slices.Clip(obs.list), obs.hist)
	}
	popts := []producer.Option{producer.WithPrefix(cfg.prefix), producer.WithMaxBodySize(cfg.maxBodySize)}
	if len(obs.list) > 0 || len(obs.hooks) > 0 {
		popts = append(popts, options.WithNotify(obs))
	}
	p, err := producer.New(rdb, popts...)
	if err != nil {
		return nil, err
	}
	hc := engine.HubConfig{Prefix: cfg.prefix, Logger: cfg.logger, Middleware: cfg.middleware}
	if len(obs.list) > 0 {
		hc.Observer = obs
	}
	c := &Client{
		rdb:      rdb,
		cfg:      cfg,
		log:      cfg.logger,
		producer: p,
		topics:   map[string]topic.Topic{},
		hub:      engine.NewHub(rdb, hc),
		obs:      obs,
	}
	if err := c.initZooKeeper(); err != nil {
		return nil, err
	}
	return c, nil
}

// Producer returns the client's producer; it works before Start and after
// Close (it holds no goroutines).
func (c *Client) Producer() *producer.Producer { return c.producer }

// Register adds a listener for t. It must be called before Start; consumer
// options (retries, lease, concurrency ...) apply to this topic only, and
// the client's (prefix, logger, observers, middleware) to every topic.
func (c *Client) Register(t topic.Topic, l consumer.MessageListener, opts ...consumer.Option) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.phase {
	case lifecycle.Started:
		return ErrStarted
	case lifecycle.Closed:
		return ErrClosed
	}
	if _, dup := c.topics[t.Name()]; dup {
		return fmt.Errorf("%w: %s", ErrDuplicateTopic, t.Name())
	}
	settings, err := engine.TopicSettings(opts)
	if err != nil {
		return err
	}
	cons, err := c.hub.New(engine.Params{Topic: t, Listener: l, Settings: settings, Coordinator: c.zkCoordinator()})
	if err != nil {
		return err
	}
	if err := c.zkAddTopic(t, cons); err != nil {
		return err
	}
	c.topics[t.Name()] = t
	c.consumers = append(c.consumers, cons)
	c.obs.hist.Registered(t, l, settings.Concurrency)
	c.obs.Consumes(t)
	return nil
}

// Start checks Redis, stores the topic definitions (refusing conflicting
// ones) and starts every consumer. ctx bounds the start-up only; Close
// stops the client. If a consumer fails to start, those already started are
// closed again; the client's shared wake-up subscription and sweeper keep
// running until Close, which a failed Start needs as much as a good one.
func (c *Client) Start(ctx context.Context) error {
	c.mu.Lock()
	if err := c.startPhaseLocked(); err != nil {
		c.mu.Unlock()
		return err
	}
	consumers := append([]*engine.Engine(nil), c.consumers...)
	c.mu.Unlock()

	if err := c.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("rmq: ping Redis: %w", err)
	}
	c.checkEviction(ctx)
	if i, err := lifecycle.StartAll(ctx, consumers, startParallel); err != nil {
		return wrapOp(err, "start "+consumers[i].Topic().Name())
	}
	if err := c.startZooKeeper(ctx); err != nil {
		for _, started := range consumers {
			_ = started.Close(ctx)
		}
		return err
	}
	c.startScheduler()
	c.startWorker()
	c.log.InfoContext(ctx, "rmq: client started", "topics", len(consumers), "prefix", c.cfg.prefix)
	return nil
}

// startParallel bounds the consumers started at once: a client of many
// topics starts them side by side (lifecycle.StartAll), and the more start
// together, the more share each subscription write and read round (1,000 topics: 148 ms
// with 64 at once, 139 with 256, medians of 8).
const startParallel = 256

// checkEviction warns when Redis may evict keys: an evicted store or msg
// key silently loses messages.
func (c *Client) checkEviction(ctx context.Context) {
	policy, err := keyspace.EvictionPolicy(ctx, c.rdb)
	if err != nil {
		c.log.WarnContext(ctx, "rmq: could not read maxmemory-policy", "err", err)
		return
	}
	if policy != "noeviction" {
		c.log.WarnContext(ctx, "rmq: Redis maxmemory-policy is not noeviction; evicted keys lose messages", "maxmemory-policy", policy)
	}
}

// Close stops every consumer (in parallel): fetching stops, handlers in
// flight may finish until ctx is done, the rest are rolled back. It returns
// when every goroutine the client started has ended.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.phase.Close() == lifecycle.Closed {
		c.mu.Unlock()
		return nil
	}
	consumers := append([]*engine.Engine(nil), c.consumers...)
	consumers = append(consumers, c.pulls.closeLocked()...)
	c.mu.Unlock()
	// A pull engine whose start was under way is closed by its starter.
	c.pulls.starting.Wait()

	// Shutdown order. The scheduler first: it sends ticks. ZooKeeper mode: leave the fleet first (no new slots), drain the
	// consumers, then end the session, which hands their slots over.
	c.stopScheduler()
	c.leaveZooKeeper(ctx)
	errs := lifecycle.CloseAll(ctx, consumers)
	errs = append(errs, c.closeZooKeeper())
	c.closeWaiter()
	c.hub.Close()
	c.obs.hist.Close(ctx) // last: its counts include what Close ended
	return errors.Join(errs...)
}

// startPhaseLocked moves the client to Started, or says why it may not
// start.
func (c *Client) startPhaseLocked() error {
	switch c.phase.Start() {
	case lifecycle.Started:
		return ErrStarted
	case lifecycle.Closed:
		return ErrClosed
	}
	return nil
}

// opError says what the client was doing when err happened. Every error
// of this module starts with "rmq: ", so the wrapped error's own prefix is
// left out of the text: "rmq: start orders: topic conflicts with ...", not
// "rmq: start orders: rmq: topic conflicts with ...". errors.Is and As see
// err.
type opError struct {
	op  string
	err error
}

func wrapOp(err error, op string) error { return &opError{op: op, err: err} }

func (e *opError) Error() string {
	return "rmq: " + e.op + ": " + strings.TrimPrefix(e.err.Error(), "rmq: ")
}

func (e *opError) Unwrap() error { return e.err }
