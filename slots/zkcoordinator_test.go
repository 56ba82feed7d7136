package slots

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/topic"
)

func TestZKConfigValidation(t *testing.T) {
	for _, bad := range []ZKConfig{
		{Root: "/rmq/x"},
		{Servers: []string{"127.0.0.1:2181"}, Root: "rmq/x"},
		{Servers: []string{"127.0.0.1:2181"}, Root: "/"},
		{Servers: []string{"127.0.0.1:2181"}, Root: "/a//b"},
		{Servers: []string{"127.0.0.1:2181"}, Root: "/a/x", SessionTimeout: time.Millisecond},
	} {
		_, err := NewZKCoordinator(bad)
		assert.True(t, errors.Is(err, ErrInvalidZKConfig), "%+v: %v", bad, err)
	}
	z, err := NewZKCoordinator(ZKConfig{Servers: []string{"127.0.0.1:2181"}, Root: "/rmq/app/"})
	require.NoError(t, err)
	assert.Equal(t, DefaultSessionTimeout, z.SessionTimeout())
	assert.Equal(t, "/rmq/app", z.paths.root)
	assert.False(t, z.Vouched(), "nothing is vouched for before a session")
	assert.Empty(t, z.Owned("t"))
	require.NoError(t, z.Close(), "closing a coordinator never started")
}

func TestZKPathsAndEpochKey(t *testing.T) {
	p := zkPaths{root: "/rmq/app"}
	assert.Equal(t, "/rmq/app/topics/orders/owners/7", p.owner("orders", 7))
	h := p.holder("orders", 7, "0c4c8f3e-5b1a-4d2e-9f55-0f7a3e3c1a2b")
	assert.Equal(t, "/rmq/app/topics/orders/holders/7-0c4c8f3e-5b1a-4d2e-9f55-0f7a3e3c1a2b", h)
	slot, member, ok := parseHolder(h[strings.LastIndexByte(h, '/')+1:])
	assert.True(t, ok)
	assert.Equal(t, 7, slot)
	assert.Equal(t, "0c4c8f3e-5b1a-4d2e-9f55-0f7a3e3c1a2b", member)
	for _, bad := range []string{"x-abc", "7", "7-", "-1-abc"} {
		_, _, ok := parseHolder(bad)
		assert.False(t, ok, bad)
	}

	// The epoch key shares the slot's hash tag, so the fenced scripts touch
	// one cluster hash slot.
	tp := topic.MustNew("orders", topic.FixedTime, 16)
	for i := 0; i < tp.SlotAmount(); i++ {
		k := KeysFor("rmq", tp, i)
		e := EpochKey("rmq", tp.Name(), i)
		assert.Equal(t, strings.TrimSuffix(k.Store, ":store")+":epoch", e)
		assert.Equal(t, e, EpochKeys("rmq", tp.Name(), tp.SlotAmount())[i])
	}
}
