package rmq

import (
	"log/slog"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/history"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/slots"
)

// Options have three scopes, each with a home of its own: what a client
// does for all its topics is an Option here (key prefix, logger,
// observers, middleware, send hooks, body size limit, ZooKeeper); what
// one topic's consumer does is a consumer.Option given to Register; what
// one message carries is a producer.SendOption given to a send. No option
// of a narrower scope can contradict a wider one.

type config struct {
	prefix                     string
	logger                     *slog.Logger
	maxBodySize                int
	observers                  []Observer            // WithObserver
	zk                         *zkOptions            // WithZooKeeper; nil: every client consumes every slot
	middleware                 []consumer.Middleware // WithMiddleware
	sendHooks                  []SendHook            // WithSendHook
	noScheduler                bool                  // WithoutScheduler
	history                    time.Duration         // WithHistory; 0: off
	historyInterval, workerTTL time.Duration
	// pullOptions are the consumer options of the client's pull engines
	// (none outside tests: export_test.go's PullEngineOptions).
	pullOptions []consumer.Option
}

func defaultConfig() config {
	return config{prefix: slots.DefaultPrefix, logger: slog.Default(), maxBodySize: producer.DefaultMaxBodySize, history: history.DefaultRetention}
}

// Option configures a Client (New), or the schedules managed without one
// (NewSchedules). Options are made by the With functions of this package
// only: the interface is sealed (its one method is unexported), so a
// program passes them on and keeps them in slices but cannot implement its
// own. A nil Option makes New fail with ErrInvalidOption (NewSchedules:
// every later call).
type Option interface{ applyClient(*config) }

// InspectorOption configures an Inspector (NewInspector). WithPrefix is the
// one there is: an inspector reads and repairs the keys under a prefix and
// starts nothing, so what the other options set (a logger, observers,
// middleware, send hooks, a body size limit, ZooKeeper, the scheduler) has
// nothing to act on in it, and the compiler refuses them. A nil
// InspectorOption is reported by every call of the inspector as
// ErrInvalidOption.
type InspectorOption interface{ applyInspector(*inspectorConfig) }

// SharedOption is an option of a Client and of an Inspector alike
// (WithPrefix): a client's and an inspector's options may share it.
type SharedOption interface {
	Option
	InspectorOption
}

// clientOption is an Option of the client only.
type clientOption func(*config)

func (f clientOption) applyClient(c *config) { f(c) }

// inspectorConfig is what an Inspector is made with.
type inspectorConfig struct {
	prefix string
}

// prefixOption is WithPrefix's: it sets the prefix of either scope.
type prefixOption string

func (p prefixOption) applyClient(c *config)             { c.prefix = string(p) }
func (p prefixOption) applyInspector(c *inspectorConfig) { c.prefix = string(p) }

// WithPrefix sets the Redis key prefix of every topic (default "rmq").
// Producers, consumers and inspectors of one topic must use the same. It
// configures a Client (New) and an Inspector (NewInspector) alike.
func WithPrefix(prefix string) SharedOption { return prefixOption(prefix) }

// WithLogger sets the logger of the client and its consumers (default
// slog.Default()).
func WithLogger(l *slog.Logger) Option { return clientOption(func(c *config) { c.logger = l }) }

// WithMaxBodySize sets the largest body the client's producer accepts, in
// bytes (default producer.DefaultMaxBodySize, 1 MiB).
func WithMaxBodySize(n int) Option {
	return clientOption(func(c *config) { c.maxBodySize = n })
}

// WithMiddleware wraps the listener of every registered topic in mws, the
// first outermost. To wrap one topic's listener only, wrap it before
// Register.
func WithMiddleware(mws ...consumer.Middleware) Option {
	return clientOption(func(c *config) { c.middleware = append(c.middleware, mws...) })
}
