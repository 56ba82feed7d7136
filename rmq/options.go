package rmq

import (
	"log/slog"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/slots"
)

type config struct {
	prefix      string
	logger      *slog.Logger
	maxBodySize int
	observers   []Observer            // WithObserver
	zk          *zkOptions            // WithZooKeeper; nil: every client consumes every slot
	middleware  []consumer.Middleware // WithMiddleware
	sendHooks   []producer.SendHook   // WithSendHook
	noScheduler bool                  // WithoutScheduler
}

func defaultConfig() config {
	return config{prefix: slots.DefaultPrefix, logger: slog.Default(), maxBodySize: producer.DefaultMaxBodySize}
}

// Option configures a Client.
type Option func(*config)

// WithPrefix sets the Redis key prefix of every topic (default "rmq").
func WithPrefix(prefix string) Option { return func(c *config) { c.prefix = prefix } }

// WithLogger sets the logger of the client and its consumers (default
// slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithMaxBodySize sets the producer's body size limit (default 1 MiB).
func WithMaxBodySize(n int) Option { return func(c *config) { c.maxBodySize = n } }

// WithMiddleware wraps the listener of every registered topic in mws, the
// first outermost, outside a topic's own (consumer.WithMiddleware).
func WithMiddleware(mws ...consumer.Middleware) Option {
	return func(c *config) { c.middleware = append(c.middleware, mws...) }
}

// WithSendHook adds a hook the client's producer runs for every message it
// sends (producer.WithSendHook): it may add headers before the write.
func WithSendHook(h producer.SendHook) Option {
	return func(c *config) {
		if h != nil {
			c.sendHooks = append(c.sendHooks, h)
		}
	}
}
