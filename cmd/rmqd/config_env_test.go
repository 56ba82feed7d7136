package main

import (
	"bytes"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// REDIS_URL names the default pool when neither --redis-url nor
// RMQD_REDIS_URL does; rmqd's own variable and the flag come first. The
// help says so, and never shows the password of the URL it was given.
func TestRedisURLVariable(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{name: "default", want: "redis://127.0.0.1:6379/0"},
		{name: "REDIS_URL", env: map[string]string{"REDIS_URL": "redis://h:1/2"}, want: "redis://h:1/2"},
		{name: "RMQD_REDIS_URL first", env: map[string]string{"REDIS_URL": "redis://h:1/2", "RMQD_REDIS_URL": "redis://r:3/0"}, want: "redis://r:3/0"},
		{name: "flag first", args: []string{"--redis-url", "redis://f:4/0"}, env: map[string]string{"REDIS_URL": "redis://h:1/2"}, want: "redis://f:4/0"},
		{name: "cluster list", env: map[string]string{"REDIS_URL": "redis://a:1,redis://b:2"}, want: "redis://a:1,redis://b:2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := parseConfig(c.args, func(name string) string { return c.env[name] }, &bytes.Buffer{})
			require.NoError(t, err)
			assert.Equal(t, c.want, cfg.redisURL)
		})
	}

	var help bytes.Buffer
	_, err := parseConfig([]string{"--help"}, func(name string) string {
		if name == "REDIS_URL" {
			return "redis://:hunter2-secret@h:1/0"
		}
		return ""
	}, &help)
	require.Error(t, err)
	assert.Contains(t, help.String(), "(RMQD_REDIS_URL, else REDIS_URL)")
	assert.NotContains(t, help.String(), "hunter2-secret")
	assert.Contains(t, help.String(), "(default redis://:***@h:1/0)")
}

// The --dev banner names addresses a client can dial, also for a listener
// on every interface.
func TestDevBanner(t *testing.T) {
	var b bytes.Buffer
	api := &net.TCPAddr{IP: net.IPv4zero, Port: 7777}
	admin := &net.TCPAddr{IP: net.IPv6unspecified, Port: 7778}
	printDevBanner(&b, api, admin, "redis://127.0.0.1:40001/0", "/dashboard/")
	out := b.String()
	for _, line := range []string{
		"  API        http://127.0.0.1:7777",
		"  admin      http://[::1]:7778",
		"  dashboard  http://[::1]:7778/dashboard/",
		"  Redis      redis://127.0.0.1:40001/0",
		"  export REDIS_URL=redis://127.0.0.1:40001/0",
		"  go run ./cmd/rmqctl topics    # from the repository's root",
	} {
		assert.Contains(t, strings.Split(out, "\n"), line)
	}
	b.Reset()
	printDevBanner(&b, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2}, "redis://x", "")
	assert.NotContains(t, b.String(), "dashboard")
}
