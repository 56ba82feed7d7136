package slots

import (
	"errors"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/topic"
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

func TestKeysShareOneHashTag(t *testing.T) {
	tp := topic.MustNew("orders.v1", topic.FixedTime, 16)
	k := KeysFor("rmq", tp, 7)
	// The tag's suffix 121 places it in hash slot 8439, inside the range
	// TagRange gives this topic slot (see cluster_test.go).
	assert.Equal(t, "rmq:{orders.v1:7:121}:store", k.Store)
	assert.Equal(t, "rmq:{orders.v1:7:121}:prepare", k.Prepare)
	assert.Equal(t, "rmq:{orders.v1:7:121}:dead", k.Dead)
	assert.Equal(t, "rmq:{orders.v1:7:121}:msg", k.Msg)
	assert.Equal(t, "rmq:{orders.v1:7:121}:deadmsg", k.DeadMsg)
	assert.Equal(t, "rmq:{orders.v1:7:121}:wake", k.Wake)
	assert.Equal(t, "rmq:{orders.v1:7:121}:delayed", k.Delayed)
	assert.Equal(t, "rmq:topics", TopicsKey("rmq"))
	assert.Equal(t, "app:{orders:0:711}:store", KeysFor("app", topic.MustNew("orders", topic.Priority, 1), 0).Store)
	for _, key := range []string{k.Store, k.Prepare, k.Dead, k.Msg, k.DeadMsg, k.Wake} {
		assert.Equal(t, 8439, keyspace.HashSlot(key), key)
	}
}

func TestValidatePrefix(t *testing.T) {
	for _, ok := range []string{"rmq", "app:rmq", "a.b-c_d"} {
		assert.NoError(t, ValidatePrefix(ok), ok)
	}
	for _, bad := range []string{"", "a{b", "a}b", "has space", string(make([]byte, 65))} {
		assert.True(t, errors.Is(ValidatePrefix(bad), ErrInvalidPrefix), "%q", bad)
	}
}
