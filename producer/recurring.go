package producer

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/rmq-go/rmq/topic"
)

// RecurringOptions are the per-message options of a message sent again and
// again from one definition (the ticks of an rmq.Schedule), read back from
// SendOptions so that they can be stored once and applied to every copy.
type RecurringOptions struct {
	MaxRetries int               // -1: the consumer's WithMaxRetries
	TTL        time.Duration     // 0: none; counted from each copy's due time
	Timeout    time.Duration     // 0: the consumer's handler timeout
	Headers    map[string]string // nil: none
}

// ParseRecurring validates opts for recurring messages on a topic of type
// typ: WithMaxRetries, WithTTL, WithTimeout and WithHeaders, with their
// limits and errors. The options that name one message or one instant
// (WithKey, WithSlotBasis, WithExpiresAt, WithNotBefore, WithDelay) and
// WithUniqueFor are refused with ErrInvalidRecurring: the recurring sender
// sets the key and the time of each copy.
func ParseRecurring(typ topic.Type, opts ...SendOption) (RecurringOptions, error) {
	sc, err := sendOptions(opts, typ)
	if err != nil {
		return RecurringOptions{}, err
	}
	j := sc.job
	switch {
	case sc.hasKey:
		return RecurringOptions{}, fmt.Errorf("%w: WithKey", ErrInvalidRecurring)
	case sc.hasBasis:
		return RecurringOptions{}, fmt.Errorf("%w: WithSlotBasis", ErrInvalidRecurring)
	case !j.expiresAt.IsZero():
		return RecurringOptions{}, fmt.Errorf("%w: WithExpiresAt (use WithTTL)", ErrInvalidRecurring)
	case !j.notBefore.IsZero() || j.hasDelay:
		return RecurringOptions{}, fmt.Errorf("%w: WithNotBefore or WithDelay", ErrInvalidRecurring)
	case sc.hasUnique:
		// The schedule stores each copy itself, not through a send: the
		// option would be dropped without a word.
		return RecurringOptions{}, fmt.Errorf("%w: WithUniqueFor", ErrInvalidRecurring)
	}
	r := RecurringOptions{MaxRetries: -1, Timeout: j.timeout, Headers: maps.Clone(j.headers)}
	if j.hasMaxRetries {
		r.MaxRetries = j.maxRetries
	}
	if j.hasTTL {
		r.TTL = j.ttl
	}
	return r, nil
}

// SendOptions returns the options that ParseRecurring reads back as r.
func (r RecurringOptions) SendOptions() []SendOption {
	var out []SendOption
	if r.MaxRetries >= 0 {
		out = append(out, WithMaxRetries(r.MaxRetries))
	}
	if r.TTL > 0 {
		out = append(out, WithTTL(r.TTL))
	}
	if r.Timeout > 0 {
		out = append(out, WithTimeout(r.Timeout))
	}
	if len(r.Headers) > 0 {
		out = append(out, WithHeaders(r.Headers))
	}
	return out
}

// ErrInvalidRecurring is returned by ParseRecurring for an option that
// names one message or one instant.
var ErrInvalidRecurring = errors.New("rmq: option not allowed on a recurring message")
