package slots

import (
	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
)

// DefaultPrefix is the key prefix used when none is configured.
const DefaultPrefix = "rmq"

// ErrInvalidPrefix is returned for key prefixes that are empty, too long or
// contain characters that would break the hash tag ('{', '}') or the layout.
var ErrInvalidPrefix = keyspace.ErrInvalidPrefix

// ValidatePrefix checks a key prefix: 1..64 characters of [A-Za-z0-9._:-].
func ValidatePrefix(p string) error { return keyspace.ValidatePrefix(p) }

// Index returns the topic slot of a message: CRC32-IEEE(basis) mod slotAmount.
// slotAmount is a power of two, so the modulo keeps the low bits.
func Index(basis []byte, slotAmount int) int { return keyspace.Index(basis, slotAmount) }

// IndexString is Index for a string basis, without a copy.
func IndexString(basis string, slotAmount int) int { return keyspace.IndexString(basis, slotAmount) }

// ErrOwnershipLost is consumer.ErrOwnershipLost, the cause a handler's
// context carries when ZooKeeper ownership of its slot is lost.
//
// Deprecated: use consumer.ErrOwnershipLost, which sits with the other
// causes a handler sees.
var ErrOwnershipLost = consumer.ErrOwnershipLost
