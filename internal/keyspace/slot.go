package keyspace

import (
	"errors"
	"fmt"
	"hash/crc32"
)

// The slot of a message and the key prefix, which package slots exports
// to users; the library's internal packages use them from here, below the
// public packages.

// DefaultPrefix is the key prefix used when none is configured.
const DefaultPrefix = "rmq"

// ErrInvalidPrefix is returned for key prefixes that are empty, too long or
// contain characters that would break the hash tag ('{', '}') or the layout.
var ErrInvalidPrefix = errors.New("rmq: invalid key prefix")

// ValidatePrefix checks a key prefix: 1..64 characters of [A-Za-z0-9._:-].
func ValidatePrefix(p string) error {
	if len(p) == 0 || len(p) > 64 {
		return fmt.Errorf("%w: length %d (want 1..64)", ErrInvalidPrefix, len(p))
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == ':'
		if !ok {
			return fmt.Errorf("%w: %q", ErrInvalidPrefix, p)
		}
	}
	return nil
}

// Index returns the topic slot of a message: CRC32-IEEE(basis) mod slotAmount.
// slotAmount is a power of two, so the modulo keeps the low bits.
func Index(basis []byte, slotAmount int) int {
	return int(crc32.ChecksumIEEE(basis) & uint32(slotAmount-1))
}

// IndexString is Index for a string basis, without a copy.
func IndexString(basis string, slotAmount int) int {
	return int(crc32.ChecksumIEEE([]byte(basis)) & uint32(slotAmount-1))
}
