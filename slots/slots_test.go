package slots

import (
	"errors"
	"hash/crc32"
	"testing"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIndexPublishedCRC32(t *testing.T) {
	// CRC-32/IEEE check value: crc32("123456789") = 0xCBF43926.
	require.Equal(t, uint32(0xCBF43926), crc32.ChecksumIEEE([]byte("123456789")))
	for _, n := range []int{1, 2, 16, 1024, 16384} {
		assert.Equal(t, int(uint32(0xCBF43926)%uint32(n)), Index([]byte("123456789"), n), "n=%d", n)
		assert.Equal(t, Index([]byte("123456789"), n), IndexString("123456789", n))
	}
	// "hello": 0x3610A686.
	assert.Equal(t, int(uint32(0x3610A686)%64), Index([]byte("hello"), 64))
}

func TestValidatePrefix(t *testing.T) {
	for _, ok := range []string{"rmq", "app:rmq", "a.b-c_d"} {
		assert.NoError(t, ValidatePrefix(ok), ok)
	}
	for _, bad := range []string{"", "a{b", "a}b", "has space", string(make([]byte, 65))} {
		assert.True(t, errors.Is(ValidatePrefix(bad), ErrInvalidPrefix), "%q", bad)
	}
}

// The library's internal packages name the default prefix and compute
// slots in internal/keyspace: the same values.
func TestSameAsKeyspace(t *testing.T) {
	assert.Equal(t, keyspace.DefaultPrefix, DefaultPrefix)
	assert.Same(t, keyspace.ErrInvalidPrefix, ErrInvalidPrefix)
}
