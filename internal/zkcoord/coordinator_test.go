package zkcoord

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConfigValidation(t *testing.T) {
	for _, bad := range []Config{
		{Root: "/rmq/x"},
		{Servers: []string{"127.0.0.1:2181"}, Root: "rmq/x"},
		{Servers: []string{"127.0.0.1:2181"}, Root: "/"},
		{Servers: []string{"127.0.0.1:2181"}, Root: "/a//b"},
		{Servers: []string{"127.0.0.1:2181"}, Root: "/a/x", SessionTimeout: time.Millisecond},
	} {
		_, err := New(bad)
		assert.True(t, errors.Is(err, ErrInvalidConfig), "%+v: %v", bad, err)
	}
	z, err := New(Config{Servers: []string{"127.0.0.1:2181"}, Root: "/rmq/app/"})
	require.NoError(t, err)
	assert.Equal(t, DefaultSessionTimeout, z.SessionTimeout())
	assert.Equal(t, "/rmq/app", z.paths.root)
	assert.False(t, z.Vouched(), "nothing is vouched for before a session")
	assert.Empty(t, z.Owned("t"))
	require.NoError(t, z.Close(), "closing a coordinator never started")
}

func TestZKPaths(t *testing.T) {
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

}
