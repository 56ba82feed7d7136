package keyspace

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rmq-go/rmq/topic"
)

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
		assert.Equal(t, 8439, HashSlot(key), key)
	}
}
