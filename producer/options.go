package producer

import "github.com/rmq-go/rmq/slots"

// DefaultMaxBodySize is the body size limit when none is configured (1 MiB).
const DefaultMaxBodySize = 1 << 20

// MaxKeyLength is the longest key (message id) accepted.
const MaxKeyLength = 1024

type config struct {
	prefix      string
	maxBodySize int
	observer    Observer
}

func defaultConfig() config {
	return config{prefix: slots.DefaultPrefix, maxBodySize: DefaultMaxBodySize}
}

// Option configures a Producer.
type Option func(*config)

// WithPrefix sets the Redis key prefix (default "rmq"). Producers and
// consumers of one topic must use the same prefix.
func WithPrefix(prefix string) Option { return func(c *config) { c.prefix = prefix } }

// WithMaxBodySize sets the largest body accepted, in bytes (default 1 MiB).
// Zero or less keeps the default.
func WithMaxBodySize(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxBodySize = n
		}
	}
}

type sendConfig struct {
	key      string
	hasKey   bool
	basis    []byte
	hasBasis bool
}

// SendOption configures one send (or Remove).
type SendOption func(*sendConfig)

// WithKey sets the message id, its merge identity: messages with the same
// key in one slot merge. Without it the id is derived from the body, so
// identical bodies merge.
func WithKey(key string) SendOption {
	return func(c *sendConfig) { c.key, c.hasKey = key, true }
}

// WithSlotBasis sets what the slot is computed from: CRC32(basis) mod the
// slot amount. Messages with one basis share a slot, which is what serial
// consumption orders by. Default: the key, else the body.
func WithSlotBasis(basis []byte) SendOption {
	return func(c *sendConfig) { c.basis, c.hasBasis = basis, true }
}
