package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/auth"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/ids"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/params"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/redact"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/service"
)

func TestRedactArgs(t *testing.T) {
	got := redact.Args([]string{"rmqd", "--redis-url", "redis://:pw1@h:1/0,redis://u:pw2@h:2", "-pool=eu=rediss://:pw3@h:3/0",
		"--admin-account", "ops:pw4", "--admin-account=dev:pw5", "--listen", "127.0.0.1:7777", "--pool"})
	require.Equal(t, []string{"rmqd", "--redis-url", "redis://:***@h:1/0,redis://u:***@h:2", "-pool=eu=rediss://:***@h:3/0",
		"--admin-account", "ops:***", "--admin-account=dev:***", "--listen", "127.0.0.1:7777", "--pool"}, got)
}

func TestRedactor(t *testing.T) {
	c, err := parseConfig([]string{"--redis-url", "redis://:p%40ss-word@h:1/0", "--pool", "eu=redis://:eu-secret@h:2",
		"--admin-account", "ops:ops-secret", "--admin-account", "dev:abc"}, func(string) string { return "" }, &bytes.Buffer{})
	require.NoError(t, err)
	var out bytes.Buffer
	w := redact.New(c.secrets()).Writer(&out)
	_, err = w.Write([]byte("a p%40ss-word, p@ss-word, eu-secret, ops-secret; abc stays (too short to hunt for)\n"))
	require.NoError(t, err)
	require.Equal(t, "a ***, ***, ***, ***; abc stays (too short to hunt for)\n", out.String())
	// Nothing to redact: the writer itself.
	require.Equal(t, &out, redact.New(nil).Writer(&out))
}

func TestParseAt(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		s     string
		at    time.Time
		delay time.Duration
		bad   string
	}{
		{"2026-01-02T03:04:06Z", now.Add(time.Second), time.Second, ""},
		{"2026-01-02T03:04:05Z", time.Time{}, 0, ""},
		{"2026-01-01T03:04:05Z", time.Time{}, 0, ""},
		{"2026-01-01T03:04:04Z", time.Time{}, 0, params.ErrAtTooEarly},
		{"1970-01-01T00:00:00Z", time.Time{}, 0, params.ErrAtTooEarly},
		{"2162-02-08T09:32:20Z", time.Time{}, 0, ""},
		{"2162-02-08T09:32:21Z", time.Time{}, 0, params.ErrAtTooLate},
		{"tomorrow", time.Time{}, 0, "invalid at"},
	} {
		at, delay, bad := params.ParseAt(c.s, now)
		require.Equal(t, c.bad, bad, c.s)
		if c.bad == "" && c.delay > 0 {
			require.True(t, c.at.Equal(at), c.s)
			require.Equal(t, c.delay, delay, c.s)
		}
		if c.delay == 0 && c.s != "2162-02-08T09:32:20Z" {
			require.True(t, at.IsZero(), c.s)
		}
	}
}

func TestHostPolicy(t *testing.T) {
	p := service.NewHostPolicy(append(service.ListenHost("rmq-admin.internal:7778"), "Ops.Example.com"))
	for host, want := range map[string]bool{
		"127.0.0.1:7778": true, "10.0.0.5": true, "[::1]:7778": true, "[fe80::1]": true,
		"localhost": true, "LOCALHOST:1": true, "rmq-admin.internal:7778": true, "ops.example.com.": true,
		"": false, "evil.test": false, "localhost.evil.test": false, "127.0.0.1.nip.io": false, "ops.example.com.evil": false,
	} {
		require.Equal(t, want, p.Allows(host), host)
	}
	require.True(t, service.NewHostPolicy([]string{"*"}).Allows("anything.test"))
	require.Empty(t, service.ListenHost(":7778"))
}

func TestClientAddr(t *testing.T) {
	g := auth.NewGuard(nil, "p", 0, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, nil)
	req := func(remote string, xff ...string) *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		for _, x := range xff {
			r.Header.Add("X-Forwarded-For", x)
		}
		return r
	}
	for _, c := range []struct {
		r    *http.Request
		want string
	}{
		{req("192.0.2.1:5000"), "192.0.2.1"},
		{req("192.0.2.1:5000", "198.51.100.7"), "192.0.2.1"}, // not a trusted proxy: its header is not believed
		{req("10.1.1.1:5000", "198.51.100.7"), "198.51.100.7"},
		{req("10.1.1.1:5000", "203.0.113.9, 198.51.100.7, 10.2.2.2"), "198.51.100.7"}, // the rightmost untrusted
		{req("10.1.1.1:5000", "203.0.113.9", "198.51.100.7"), "198.51.100.7"},
		{req("10.1.1.1:5000", "junk, 10.2.2.2"), "10.2.2.2"},
		{req("10.1.1.1:5000"), "10.1.1.1"},
		{req("[2001:db8:1:2:3:4:5:6]:5000"), "2001:db8:1:2::"}, // counted by /64
		{req("[::ffff:192.0.2.1]:5000"), "192.0.2.1"},
	} {
		require.Equal(t, c.want, g.ClientAddr(c.r).String(), "%s %v", c.r.RemoteAddr, c.r.Header.Values("X-Forwarded-For"))
	}
}

func TestLogPath(t *testing.T) {
	fp := ids.Fingerprint("TOKEN")
	for path, want := range map[string]string{
		"/token/ns":                   "/token/ns",
		"/token/ns/TOKEN":             "/token/ns/" + fp,
		"/token/ns/TOKEN/limit":       "/token/ns/" + fp + "/limit",
		"/token/ns/other:TOKEN/limit": "/token/ns/other:" + fp + "/limit",
		"/token/ns/TO%4BEN":           "/token/ns/" + fp,
		"/api/ns/q":                   "/api/ns/q",
	} {
		r := httptest.NewRequest("GET", path, nil)
		require.Equal(t, want, respond.LogPath(r), path)
	}
	require.True(t, strings.HasPrefix(fp, "~") && len(fp) == 9)
}
