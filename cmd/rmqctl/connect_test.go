package main

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/topic"
)

// sendWaiting stores n far-future messages of a one-slot topic "conn"
// through rdb, so "rmqctl topics" has something to count.
func sendWaiting(t *testing.T, rdb redis.UniversalClient, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := rmqtest.Producer(t, rdb, "rmq")
	tp := topic.MustNew("conn", topic.FixedTime, 1)
	for j := range n {
		_, err := p.SendFixedTime(ctx, tp, []byte(fmt.Sprintf("m%d", j)), time.Now().Add(time.Hour))
		require.NoError(t, err)
	}
}

const connTopicRow = `(?m)^conn\s+fixedtime\s+1\s+%d\s+0\s+0$`

// requirepass: the password comes in a URL (--url, $REDIS_URL, or --redis
// given a URL), the database in its path; without it rmqctl says how to
// give it.
func TestRmqctlPasswordURL(t *testing.T) {
	bin := buildBinary(t)
	const pw = "p@ss:w/rd"
	srv := redistest.Start(t, redisserver.Config{Password: pw})
	sendWaiting(t, redistest.Client(t, srv, func(o *redis.Options) { o.Password = pw; o.DB = 2 }), 3)
	sendWaiting(t, redistest.Client(t, srv, func(o *redis.Options) { o.Password = pw }), 1)

	u := (&url.URL{Scheme: "redis", User: url.UserPassword("", pw), Host: srv.Addr(), Path: "/2"}).String()
	db0 := (&url.URL{Scheme: "redis", User: url.UserPassword("default", pw), Host: srv.Addr()}).String()
	for name, r := range map[string]ctl{
		"--url":           {t: t, bin: bin, global: []string{"--url", u}},
		"$REDIS_URL":      {t: t, bin: bin, env: []string{"REDIS_URL=" + u}},
		"--redis URL":     {t: t, bin: bin, global: []string{"--redis", u}},
		"$RMQ_REDIS URL":  {t: t, bin: bin, env: []string{"RMQ_REDIS=" + u}},
		"flag beats env":  {t: t, bin: bin, global: []string{"--url", u}, env: []string{"RMQ_REDIS=127.0.0.1:1"}},
		"own env beats":   {t: t, bin: bin, env: []string{"RMQ_REDIS=" + u, "REDIS_URL=redis://127.0.0.1:1"}},
		"query parameter": {t: t, bin: bin, global: []string{"--url", u + "?dial_timeout=3s"}},
	} {
		t.Run(name, func(t *testing.T) {
			r.t = t
			assert.Regexp(t, fmt.Sprintf(connTopicRow, 3), r.ok("topics"))
		})
	}
	t.Run("user default and database 0", func(t *testing.T) {
		r := ctl{t: t, bin: bin, global: []string{"--url", db0}}
		assert.Regexp(t, fmt.Sprintf(connTopicRow, 1), r.ok("topics"))
	})

	t.Run("no password", func(t *testing.T) {
		r := ctl{t: t, bin: bin, global: []string{"--redis", srv.Addr()}}
		res := r.run("", "topics")
		assert.Equal(t, 1, res.code)
		assert.Contains(t, res.stderr, "connect to Redis at "+srv.Addr()+": NOAUTH")
		assert.Contains(t, res.stderr, "--url redis://USER:PASSWORD@HOST:PORT")
	})
	t.Run("wrong password is not echoed", func(t *testing.T) {
		bad := (&url.URL{Scheme: "redis", User: url.UserPassword("", "wrong-secret"), Host: srv.Addr()}).String()
		r := ctl{t: t, bin: bin, global: []string{"--url", bad}}
		res := r.run("", "topics")
		assert.Equal(t, 1, res.code)
		assert.Contains(t, res.stderr, "WRONGPASS")
		assert.Contains(t, res.stderr, "redis://:xxxxx@"+srv.Addr())
		assert.NotContains(t, res.stderr, "wrong-secret")
	})
}

// A TLS-only server with a certificate from the test's own CA: --tls-ca
// makes rediss:// work; without it, or over plain TCP, the error says
// which flag is missing.
func TestRmqctlTLS(t *testing.T) {
	bin := buildBinary(t)
	files := redistest.TLSFiles(t)
	srv := redistest.Start(t, redisserver.Config{TLS: &files})
	tc, err := files.ClientConfig()
	require.NoError(t, err)
	sendWaiting(t, redistest.Client(t, srv, func(o *redis.Options) { o.TLSConfig = tc }), 2)

	tlsURL := "rediss://" + srv.Addr()
	ok := ctl{t: t, bin: bin, global: []string{"--url", tlsURL, "--tls-ca", files.CAFile}}
	assert.Regexp(t, fmt.Sprintf(connTopicRow, 2), ok.ok("topics"))
	env := ctl{t: t, bin: bin, global: []string{"--tls-ca", files.CAFile}, env: []string{"REDIS_URL=" + tlsURL}}
	assert.Regexp(t, fmt.Sprintf(connTopicRow, 2), env.ok("topics"))
	// The certificate names 127.0.0.1 and localhost, not redis.example.
	named := ctl{t: t, bin: bin, global: []string{"--url", tlsURL, "--tls-ca", files.CAFile, "--tls-server-name", "localhost"}}
	assert.Regexp(t, fmt.Sprintf(connTopicRow, 2), named.ok("topics"))

	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"system roots only", []string{"--url", tlsURL}, []string{"certificate signed by unknown authority", "--tls-ca FILE"}},
		{"other name", []string{"--url", tlsURL, "--tls-ca", files.CAFile, "--tls-server-name", "redis.example"}, []string{"redis.example", "--tls-server-name NAME"}},
		{"plain TCP", []string{"--redis", srv.Addr(), "--timeout", "5s"}, []string{"connect to Redis at " + srv.Addr(), "rediss://"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := ctl{t: t, bin: bin, global: c.args}
			res := r.run("", "topics")
			assert.Equal(t, 1, res.code, res.stderr)
			for _, w := range c.want {
				assert.Contains(t, res.stderr, w)
			}
		})
	}
	t.Run("unreadable CA file", func(t *testing.T) {
		r := ctl{t: t, bin: bin, global: []string{"--url", tlsURL, "--tls-ca", files.KeyFile}}
		res := r.run("", "topics")
		assert.Equal(t, 1, res.code)
		assert.Contains(t, res.stderr, "no PEM certificate")
	})
}

// Which Redis a command line and environment name, and which mistakes are
// usage errors (exit 2) before anything is dialled.
func TestResolveTarget(t *testing.T) {
	type want struct {
		addr     string // single node
		cluster  []string
		user, pw string
		db       int
		tls      bool
	}
	for _, c := range []struct {
		name  string
		flags connFlags
		env   map[string]string
		want  want
		err   string
	}{
		{name: "default", want: want{addr: "127.0.0.1:6379"}},
		{name: "redis flag", flags: connFlags{redis: "10.0.0.1:7000"}, want: want{addr: "10.0.0.1:7000"}},
		{name: "url", flags: connFlags{url: "redis://u:p@h:1/3"}, want: want{addr: "h:1", user: "u", pw: "p", db: 3}},
		{name: "url without port", flags: connFlags{url: "rediss://h"}, want: want{addr: "h:6379", tls: true}},
		{name: "unix socket", flags: connFlags{url: "unix://:p@/run/redis.sock?db=4"}, want: want{addr: "/run/redis.sock", pw: "p", db: 4}},
		{name: "url in redis flag", flags: connFlags{redis: "redis://:p@h:1"}, want: want{addr: "h:1", pw: "p"}},
		{name: "cluster list", flags: connFlags{cluster: "a:1, b:2,"}, want: want{cluster: []string{"a:1", "b:2"}}},
		{name: "cluster url", flags: connFlags{cluster: "rediss://u:p@a:1?addr=b:2"}, want: want{cluster: []string{"a:1", "b:2"}, user: "u", pw: "p", tls: true}},
		{name: "env order", env: map[string]string{"REDIS_URL": "redis://c:3", "RMQ_REDIS": "b:2", "RMQ_CLUSTER": "a:1"}, want: want{cluster: []string{"a:1"}}},
		{name: "RMQ_REDIS before REDIS_URL", env: map[string]string{"REDIS_URL": "redis://c:3", "RMQ_REDIS": "b:2"}, want: want{addr: "b:2"}},
		{name: "REDIS_URL", env: map[string]string{"REDIS_URL": "redis://:p@c:3/1"}, want: want{addr: "c:3", pw: "p", db: 1}},
		{name: "flag before env", flags: connFlags{redis: "x:9"}, env: map[string]string{"RMQ_CLUSTER": "a:1"}, want: want{addr: "x:9"}},
		{name: "two flags", flags: connFlags{url: "redis://h:1", cluster: "a:1"}, err: "--url and --cluster exclude each other"},
		{name: "bad address", flags: connFlags{redis: "h"}, err: `--redis "h": want HOST:PORT`},
		{name: "bad scheme", flags: connFlags{url: "http://u:secret@h:1"}, err: `URL scheme "http"`},
		{name: "bad db", flags: connFlags{url: "redis://u:secret@h:1/x"}, err: "invalid database number"},
		{name: "unknown parameter", flags: connFlags{url: "redis://h:1?bogus=1"}, err: "bogus"},
		{name: "two cluster urls", flags: connFlags{cluster: "redis://a:1,redis://b:2"}, err: "give one URL"},
		{name: "bad cluster address", flags: connFlags{cluster: "a:1,b"}, err: `"b" is not HOST:PORT`},
		{name: "CA without TLS", flags: connFlags{url: "redis://h:1", tlsCA: "ca.pem"}, err: "--tls-ca needs TLS"},
		{name: "server name without TLS", flags: connFlags{redis: "h:1", tlsName: "n"}, err: "--tls-server-name needs TLS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := c.flags
			f.set = map[string]bool{}
			for name, v := range map[string]string{"url": f.url, "redis": f.redis, "cluster": f.cluster, "tls-ca": f.tlsCA, "tls-server-name": f.tlsName} {
				f.set[name] = v != ""
			}
			tg, err := f.resolveTarget(func(name string) string { return c.env[name] })
			if c.err != "" {
				var ue *usageError
				require.ErrorAs(t, err, &ue)
				assert.Contains(t, err.Error(), c.err)
				assert.NotContains(t, err.Error(), "secret")
				return
			}
			require.NoError(t, err)
			var got want
			if tg.single != nil {
				o := tg.single
				got = want{addr: o.Addr, user: o.Username, pw: o.Password, db: o.DB, tls: o.TLSConfig != nil}
			} else {
				o := tg.cluster
				got = want{cluster: o.Addrs, user: o.Username, pw: o.Password, tls: o.TLSConfig != nil}
			}
			assert.Equal(t, c.want, got)
		})
	}
}
