package producer

import (
	"errors"
)

var (
	// ErrEmptyBody is returned for a nil or empty body.
	ErrEmptyBody = errors.New("rmq: empty message body")
	// ErrBodyTooLarge is returned for a body over the producer's limit.
	ErrBodyTooLarge = errors.New("rmq: message body too large")
	// ErrInvalidPriority is returned for priorities <= 16 or above 2^53.
	ErrInvalidPriority = errors.New("rmq: invalid priority")
	// ErrInvalidTime is returned for a zero or out-of-range fixed time, or
	// a WithNotBefore time after 2^48-1 ms since the Unix epoch.
	ErrInvalidTime = errors.New("rmq: invalid time")
	// ErrInvalidRange is returned for a negative or huge time range.
	ErrInvalidRange = errors.New("rmq: invalid time range")
	// ErrTypeMismatch is returned when the send method does not match the
	// topic's type (SendPriority on a fixed-time topic, say).
	ErrTypeMismatch = errors.New("rmq: send method does not match the topic type")
	// ErrInvalidKey is returned for an empty key or one over 1024 bytes.
	ErrInvalidKey = errors.New("rmq: invalid message key")
	// ErrInvalidSlotBasis is returned for an empty slot basis.
	ErrInvalidSlotBasis = errors.New("rmq: invalid slot basis")
)

var (
	// ErrInvalidMaxRetries is returned for WithMaxRetries outside 0..998.
	ErrInvalidMaxRetries = errors.New("rmq: invalid max retries")
	// ErrInvalidExpiry is returned for a WithTTL or WithExpiresAt that is
	// not in the future, or out of range (WithExpiresAt after 2^48-1 ms
	// since the Unix epoch).
	ErrInvalidExpiry = errors.New("rmq: invalid expiry")
	// ErrInvalidTimeout is returned for a WithTimeout outside 1ms..24h.
	ErrInvalidTimeout = errors.New("rmq: invalid timeout")
	// ErrInvalidHeaders is returned for headers over the limits of
	// WithHeaders (MaxHeaders, MaxHeaderKeyLength, MaxHeaderValueLength) or
	// with an empty key.
	ErrInvalidHeaders = errors.New("rmq: invalid headers")
)
