package producer

import "time"

// DefaultMaxBodySize is the body size limit when none is configured (1 MiB).
const DefaultMaxBodySize = 1 << 20

// MaxKeyLength is the longest key (message id) accepted.
const MaxKeyLength = 1024

type sendConfig struct {
	key      string
	hasKey   bool
	basis    []byte
	hasBasis bool
	group    string // WithGroup (group.go)
	hasGroup bool
	job      jobConfig
	// unique is WithUniqueFor's window (unique.go).
	unique    time.Duration
	hasUnique bool
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

// Limits of WithHeaders.
const (
	MaxHeaders           = 32   // headers per message
	MaxHeaderKeyLength   = 128  // bytes of a key (at least 1)
	MaxHeaderValueLength = 1024 // bytes of a value
)

// maxTimeout bounds WithTimeout: the envelope keeps it in 32 bits of ms.
const maxTimeout = 24 * time.Hour

// jobConfig holds the per-message options that travel in the envelope.
type jobConfig struct {
	maxRetries    int
	hasMaxRetries bool
	ttl           time.Duration
	hasTTL        bool
	expiresAt     time.Time
	timeout       time.Duration
	headers       map[string]string
	notBefore     time.Time
	delay         time.Duration
	hasDelay      bool
	group         string // WithGroup: goes in the envelope's options
}

// WithMaxRetries sets this message's retries after the first attempt
// (0..998), in place of the consumer's WithMaxRetries. It survives
// retries and requeues.
func WithMaxRetries(n int) SendOption {
	return func(c *sendConfig) { c.job.maxRetries, c.job.hasMaxRetries = n, true }
}

// WithTTL drops the message if it is not acked within d of the send: it
// is never delivered after that instant, its body is deleted, and the
// consumer that notices it reports it (rmq_expired_total). Expiry is
// noticed where messages are touched anyway (a fetch, a lease sweep, a
// requeue), so no timer runs per message; an expired message may occupy
// memory until then.
func WithTTL(d time.Duration) SendOption {
	return func(c *sendConfig) { c.job.ttl, c.job.hasTTL = d, true }
}

// WithExpiresAt is WithTTL with an instant (millisecond precision, rounded
// down: never delivered at or after t).
func WithExpiresAt(t time.Time) SendOption { return func(c *sendConfig) { c.job.expiresAt = t } }

// WithTimeout sets this message's handler timeout (1ms..24h), in place of
// the consumer's WithHandlerTimeout: past it the handler's context is
// cancelled, its lease is no longer extended and the delivery is rolled
// back. The lease itself stays the consumer's WithPrepareTimeout (a crashed
// consumer's message comes back after that), and a pulled message's lease
// is the puller's.
func WithTimeout(d time.Duration) SendOption { return func(c *sendConfig) { c.job.timeout = d } }

// WithHeaders attaches string headers (Message.Headers): at most
// MaxHeaders, keys of 1..MaxHeaderKeyLength bytes, values of at most
// MaxHeaderValueLength bytes; more is refused with ErrInvalidHeaders. The
// map is copied.
func WithHeaders(h map[string]string) SendOption {
	return func(c *sendConfig) {
		if c.job.headers == nil {
			c.job.headers = make(map[string]string, len(h))
		}
		for k, v := range h {
			c.job.headers[k] = v
		}
	}
}

// WithNotBefore makes a priority message compete by priority only from t
// on (never before t, at full time.Time precision). Priority topics only:
// the other types say when with their own arguments.
func WithNotBefore(t time.Time) SendOption { return func(c *sendConfig) { c.job.notBefore = t } }

// WithDelay is WithNotBefore(time.Now().Add(d)).
func WithDelay(d time.Duration) SendOption {
	return func(c *sendConfig) { c.job.delay, c.job.hasDelay = d, true }
}
