package rmq

import (
	"log/slog"

	"github.com/rmq-go/rmq/consumer"
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
	prefix      string
	logger      *slog.Logger
	maxBodySize int
	observers   []Observer            // WithObserver
	zk          *zkOptions            // WithZooKeeper; nil: every client consumes every slot
	middleware  []consumer.Middleware // WithMiddleware
	sendHooks   []SendHook            // WithSendHook
	noScheduler bool                  // WithoutScheduler
	// pullOptions are the consumer options of the client's pull engines
	// (none outside tests: export_test.go's PullEngineOptions).
	pullOptions []consumer.Option
}

func defaultConfig() config {
	return config{prefix: slots.DefaultPrefix, logger: slog.Default(), maxBodySize: producer.DefaultMaxBodySize}
}

// Option configures a Client (New) or an Inspector (NewInspector).
type Option func(*config)

// WithPrefix sets the Redis key prefix of every topic (default "rmq").
// Producers, consumers and inspectors of one topic must use the same.
func WithPrefix(prefix string) Option { return func(c *config) { c.prefix = prefix } }

// WithLogger sets the logger of the client and its consumers (default
// slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithMaxBodySize sets the largest body the client's producer accepts, in
// bytes (default producer.DefaultMaxBodySize, 1 MiB).
func WithMaxBodySize(n int) Option { return func(c *config) { c.maxBodySize = n } }

// WithMiddleware wraps the listener of every registered topic in mws, the
// first outermost. To wrap one topic's listener only, wrap it before
// Register.
func WithMiddleware(mws ...consumer.Middleware) Option {
	return func(c *config) { c.middleware = append(c.middleware, mws...) }
}
