package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// REDIS_URL names a Redis for rmqctl as it does for rmqd: one URL or
// HOST:PORT is one server, a comma-separated list a cluster's seeds. The
// older variables keep working and come first.
func TestRedisURLVariable(t *testing.T) {
	for _, c := range []struct {
		name    string
		env     map[string]string
		addr    string   // one server, or
		cluster []string // a cluster
		pw      string
		where   string
		err     string
	}{
		{name: "one url", env: map[string]string{"REDIS_URL": "redis://:pw@h:1/2"}, addr: "h:1", pw: "pw", where: "redis://:xxxxx@h:1/2"},
		{name: "host port", env: map[string]string{"REDIS_URL": "h:1"}, addr: "h:1", where: "h:1"},
		{name: "cluster urls", env: map[string]string{"REDIS_URL": "redis://:pw@a:1, redis://b:2,c:3"}, cluster: []string{"a:1", "b:2", "c:3"}, pw: "pw", where: "redis://:xxxxx@a:1,b:2,c:3"},
		{name: "cluster host ports", env: map[string]string{"REDIS_URL": "a:1,b:2"}, cluster: []string{"a:1", "b:2"}, where: "a:1,b:2"},
		{name: "RMQ_REDIS alias first", env: map[string]string{"REDIS_URL": "redis://c:3", "RMQ_REDIS": "b:2"}, addr: "b:2", where: "b:2"},
		{name: "RMQ_CLUSTER alias first", env: map[string]string{"REDIS_URL": "c:3", "RMQ_CLUSTER": "a:1,b:2"}, cluster: []string{"a:1", "b:2"}, where: "a:1,b:2"},
		{name: "REDIS_ADDR is not rmqctl's", env: map[string]string{"REDIS_ADDR": "e:5"}, addr: "127.0.0.1:6379", where: "127.0.0.1:6379"},
		{name: "bad seed", env: map[string]string{"REDIS_URL": "redis://:secret@a:1,redis://b"}, err: "$REDIS_URL: a seed after the first is HOST:PORT"},
		{name: "unix cluster", env: map[string]string{"REDIS_URL": "unix:///s.sock,a:1"}, err: "a cluster URL is redis:// or rediss://"},
		{name: "bad scheme", env: map[string]string{"REDIS_URL": "http://u:secret@h:1"}, err: `$REDIS_URL: URL scheme "http"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := connFlags{set: map[string]bool{}}
			tg, err := f.resolveTarget(func(name string) string { return c.env[name] })
			if c.err != "" {
				var ue *usageError
				require.ErrorAs(t, err, &ue)
				assert.Contains(t, err.Error(), c.err)
				assert.NotContains(t, err.Error(), "secret")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.where, tg.where)
			if c.cluster != nil {
				require.NotNil(t, tg.cluster, "a cluster")
				assert.Equal(t, c.cluster, tg.cluster.Addrs)
				assert.Equal(t, c.pw, tg.cluster.Password)
				return
			}
			require.NotNil(t, tg.single, "one server")
			assert.Equal(t, c.addr, tg.single.Addr)
			assert.Equal(t, c.pw, tg.single.Password)
		})
	}
}
