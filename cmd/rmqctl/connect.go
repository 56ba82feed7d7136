package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/cmd/internal/redisaddr"

	"github.com/rmq-go/rmq/rmq"
)

// defaultAddr is the Redis rmqctl talks to when nothing names one.
const defaultAddr = "127.0.0.1:6379"

// connFlags are the global flags and variables that say how to reach Redis.
type connFlags struct {
	url, redis, cluster string // as given on the command line
	set                 map[string]bool
	tlsCA, tlsName      string
}

// target is where rmqctl connects, resolved from connFlags and the
// environment before anything is dialled.
type target struct {
	single  *redis.Options        // one server, or
	cluster *redis.ClusterOptions // a Redis Cluster
	where   string                // for messages: address or URL without its password
}

// envSources are the variables that name the Redis when no flag does, in
// the order they are read. REDIS_URL is the project's one name for it (the
// examples, the demo and rmqd read it too). RMQ_CLUSTER and RMQ_REDIS are
// rmqctl's older names, kept as aliases; they come first because a
// variable named for rmqd is a more specific wish than REDIS_URL, which
// may have been set for another program.
var envSources = []struct {
	name  string
	parse func(from, v string) (*target, error)
}{
	{"RMQ_CLUSTER", clusterSeeds},
	{"RMQ_REDIS", singleAddr},
	{"REDIS_URL", redisURL},
}

// resolveTarget picks one source, in this order: an explicit --url, --redis
// or --cluster (at most one of them); else the first of envSources that is
// set; else 127.0.0.1:6379.
func (f *connFlags) resolveTarget(getenv func(string) string) (*target, error) {
	var given []string
	for _, name := range []string{"url", "redis", "cluster"} {
		if f.set[name] {
			given = append(given, "--"+name)
		}
	}
	if len(given) > 1 {
		return nil, usagef("", "%s exclude each other: name one Redis", strings.Join(given, " and "))
	}
	var (
		t   *target
		err error
	)
	switch {
	case f.set["url"]:
		t, err = singleURL("--url", f.url)
	case f.set["redis"]:
		t, err = singleAddr("--redis", f.redis)
	case f.set["cluster"]:
		t, err = clusterSeeds("--cluster", f.cluster)
	default:
		t, err = singleAddr("default", defaultAddr)
		for _, src := range envSources {
			if v := getenv(src.name); v != "" {
				t, err = src.parse("$"+src.name, v)
				break
			}
		}
	}
	if err != nil {
		return nil, err
	}
	return t, f.applyTLS(t)
}

// redisURL reads $REDIS_URL with the parser rmqd reads it with
// (redisaddr): one URL or a bare HOST:PORT is one server, a
// comma-separated list of them is a cluster's seeds. A single address
// goes through singleAddr for rmqctl's own scheme checks and messages.
func redisURL(from, v string) (*target, error) {
	if !strings.Contains(v, ",") {
		return singleAddr(from, v)
	}
	for i, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); !strings.Contains(p, "://") {
			continue
		}
		u, err := parseURL(from, p)
		switch {
		case err != nil:
			return nil, err
		case u.Scheme == "unix":
			return nil, usagef("", "%s: a cluster URL is redis:// or rediss://", from)
		case i > 0 && u.Port() == "":
			return nil, usagef("", "%s: a seed after the first is HOST:PORT or redis[s]://HOST:PORT", from)
		}
	}
	_, opts, err := redisaddr.Parse(v, false)
	if err != nil {
		return nil, usagef("", "%s: %v", from, err)
	}
	where := make([]string, 0, len(opts.Addrs))
	for i, a := range opts.Addrs {
		if i == 0 {
			first := strings.TrimSpace(strings.Split(v, ",")[0])
			if u, err := url.Parse(first); err == nil && strings.Contains(first, "://") {
				where = append(where, u.Redacted())
				continue
			}
		}
		where = append(where, a)
	}
	return &target{cluster: opts, where: strings.Join(where, ",")}, nil
}

// singleAddr reads --redis: HOST:PORT, or a URL given there by habit
// (accepted as if it came with --url).
func singleAddr(from, v string) (*target, error) {
	if strings.Contains(v, "://") {
		return singleURL(from, v)
	}
	if _, _, err := net.SplitHostPort(v); err != nil {
		return nil, usagef("", "%s %q: want HOST:PORT, or a URL with --url (redis://USER:PASSWORD@HOST:PORT/DB)", from, v)
	}
	return &target{single: &redis.Options{Addr: v}, where: v}, nil
}

// singleURL reads a URL of one server: redis://, rediss:// (TLS) or
// unix://, with go-redis's query parameters.
func singleURL(from, v string) (*target, error) {
	u, err := parseURL(from, v)
	if err != nil {
		return nil, err
	}
	o, err := redis.ParseURL(v)
	if err != nil {
		return nil, usagef("", "%s %s: %v", from, u.Redacted(), err)
	}
	return &target{single: o, where: u.Redacted()}, nil
}

// clusterSeeds reads --cluster: HOST:PORT,HOST:PORT,... or one URL
// redis[s]://USER:PASSWORD@HOST:PORT?addr=HOST:PORT&addr=... .
func clusterSeeds(from, v string) (*target, error) {
	if strings.Contains(v, "://") {
		if strings.Contains(v, ",") {
			return nil, usagef("", "%s: give one URL; further seed nodes go in its query: ?addr=HOST:PORT&addr=HOST:PORT", from)
		}
		u, err := parseURL(from, v)
		if err != nil {
			return nil, err
		}
		if u.Scheme == "unix" {
			return nil, usagef("", "%s: a cluster URL is redis:// or rediss://", from)
		}
		o, err := redis.ParseClusterURL(v)
		if err != nil {
			return nil, usagef("", "%s %s: %v", from, u.Redacted(), err)
		}
		return &target{cluster: o, where: u.Redacted()}, nil
	}
	var addrs []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(s); err != nil {
			return nil, usagef("", "%s: %q is not HOST:PORT", from, s)
		}
		addrs = append(addrs, s)
	}
	if len(addrs) == 0 {
		return nil, usagef("", "%s: no address given", from)
	}
	return &target{cluster: &redis.ClusterOptions{Addrs: addrs}, where: strings.Join(addrs, ",")}, nil
}

// parseURL checks the scheme itself and never repeats the URL in an error:
// it may hold a password.
func parseURL(from, v string) (*url.URL, error) {
	u, err := url.Parse(v)
	if err != nil {
		return nil, usagef("", "%s: not a valid URL (want redis://USER:PASSWORD@HOST:PORT/DB or rediss://...)", from)
	}
	switch u.Scheme {
	case "redis", "rediss", "unix":
		return u, nil
	}
	return nil, usagef("", "%s: URL scheme %q: want redis, rediss (TLS) or unix", from, u.Scheme)
}

// applyTLS adds --tls-ca and --tls-server-name to a rediss:// target.
func (f *connFlags) applyTLS(t *target) error {
	tc := t.tlsConfig()
	if tc == nil {
		for _, name := range []string{"tls-ca", "tls-server-name"} {
			if f.set[name] {
				return usagef("", "--%s needs TLS: name the server with a rediss:// URL", name)
			}
		}
		return nil
	}
	if f.tlsCA != "" {
		pem, err := os.ReadFile(f.tlsCA)
		if err != nil {
			return fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--tls-ca %s: no PEM certificate in it", f.tlsCA)
		}
		tc.RootCAs = pool
	}
	if f.tlsName != "" {
		tc.ServerName = f.tlsName
	}
	return nil
}

func (t *target) tlsConfig() *tls.Config {
	if t.single != nil {
		return t.single.TLSConfig
	}
	return t.cluster.TLSConfig
}

// connect opens Redis and the inspector, once flags are known to be right.
func (a *app) connect(ctx context.Context) error {
	t := a.target
	if tc := t.tlsConfig(); tc != nil && tc.InsecureSkipVerify {
		fmt.Fprintln(a.stderr, "rmqctl: warning: skip_verify=true: the server's certificate is not checked, so anyone on the path can read the password")
	}
	// Redis 7.0 does not know CLIENT SETINFO, and a least-privilege ACL
	// user need not allow it; rmqctl reports its own errors, so one dial
	// attempt is enough.
	if o := t.single; o != nil {
		o.DisableIdentity = true
		if o.DialerRetries == 0 {
			o.DialerRetries = 1
		}
		a.rdb = redis.NewClient(o)
	} else {
		o := t.cluster
		o.DisableIdentity = true
		if o.DialerRetries == 0 {
			o.DialerRetries = 1
		}
		a.rdb = redis.NewClusterClient(o)
	}
	if err := a.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("connect to Redis at %s: %w%s", t.where, err, connectHint(t, err))
	}
	a.insp = rmq.NewInspector(a.rdb, rmq.WithPrefix(a.prefix))
	return nil
}

// connectHint suggests the flag that fixes the usual connection failures.
func connectHint(t *target, err error) string {
	msg := err.Error()
	var unknownCA x509.UnknownAuthorityError
	var badHost x509.HostnameError
	switch {
	case strings.HasPrefix(msg, "NOAUTH"):
		return " (give the user and password in the URL: --url redis://USER:PASSWORD@HOST:PORT, or $REDIS_URL)"
	case strings.HasPrefix(msg, "WRONGPASS"):
		return " (check the user and password in the URL)"
	case strings.HasPrefix(msg, "NOPERM"):
		return " (the ACL user lacks a permission rmqctl needs: see docs/operations.md)"
	case errors.As(err, &unknownCA):
		return " (name the CA that signed the server's certificate with --tls-ca FILE)"
	case errors.As(err, &badHost):
		return " (the certificate is for another name: --tls-server-name NAME)"
	case t.tlsConfig() == nil && (errors.Is(err, net.ErrClosed) || strings.Contains(msg, "EOF") || strings.Contains(msg, "connection reset")):
		return " (if the server speaks TLS, use a rediss:// URL)"
	}
	return ""
}
