package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// REDIS_URL names the Redis as a URL or a bare host:port; REDIS_ADDR, its
// older name, counts only without it; a URL that is not Redis's is refused.
func TestRedisOptions(t *testing.T) {
	for _, tc := range []struct {
		env      map[string]string
		addr     string
		db       int
		password string
	}{
		{env: nil, addr: "127.0.0.1:6379"},
		{env: map[string]string{"REDIS_URL": "redis://10.0.0.1:6380/2"}, addr: "10.0.0.1:6380", db: 2},
		{env: map[string]string{"REDIS_URL": "redis://:s3cret@10.0.0.1:6380"}, addr: "10.0.0.1:6380", password: "s3cret"},
		{env: map[string]string{"REDIS_URL": "10.0.0.1:6380"}, addr: "10.0.0.1:6380"},
		{env: map[string]string{"REDIS_ADDR": "10.0.0.2:6381"}, addr: "10.0.0.2:6381"},
		{env: map[string]string{"REDIS_URL": "redis://10.0.0.1:6380", "REDIS_ADDR": "10.0.0.2:6381"}, addr: "10.0.0.1:6380"},
	} {
		opts, err := redisOptions(func(k string) string { return tc.env[k] })
		require.NoError(t, err, tc.env)
		assert.Equal(t, tc.addr, opts.Addr, tc.env)
		assert.Equal(t, tc.db, opts.DB, tc.env)
		assert.Equal(t, tc.password, opts.Password, tc.env)
	}
	_, err := redisOptions(func(k string) string { return map[string]string{"REDIS_URL": "http://10.0.0.1"}[k] })
	assert.ErrorContains(t, err, "REDIS_URL")
}
