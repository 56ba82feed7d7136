package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/forward"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/quota"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/redact"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/service"
)

// config is rmqd's command line. Every flag can also come from an
// environment variable named RMQD_ and the flag in upper snake case; a flag
// on the command line wins over the variable. The default pool's URL also
// comes from REDIS_URL, the one variable every program of the project
// reads (rmqctl, the examples, the demo), when RMQD_REDIS_URL is not set:
// rmqd's own name is more specific, so it wins.
type config struct {
	redisURL        string
	redisCluster    bool
	redisTLSCA      string
	listen          string
	adminListen     string
	pools           poolFlags
	forwards        forward.Flags
	prefix          string
	accounts        accountFlags
	logFormat       string
	logLevel        string
	accessLog       bool
	maxWait         time.Duration
	cacheTTL        time.Duration
	shutdownTimeout time.Duration
	dev             bool
	dashboard       string
	pprof           bool
	adminHosts      hostFlags
	authFailures    int
	trustedProxies  prefixFlags
	quotas          quota.Quotas
}

const usageHead = `rmqd serves RMQ for Go over HTTP, wire-compatible with lmstfy's API:
namespaces and tokens, publish (delay, ttl, tries), consume (ttr, long-poll
timeout, several queues), ack, peek, dead letter and respawn, per-token rate
limits; plus RMQ's priority and range-merge queues, keys, millisecond delays
and absolute times. Everything it knows is in Redis, so any number of rmqd
processes can serve the same Redis.

Usage: rmqd [flags]

Flags (each also from the environment variable shown):
`

// envName is the environment variable of a flag: --admin-listen is
// RMQD_ADMIN_LISTEN.
func envName(flagName string) string {
	return "RMQD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// redisURLEnv names the Redis of every program of the project; for rmqd it
// is the fallback of RMQD_REDIS_URL.
const redisURLEnv = "REDIS_URL"

// lookupEnv reads the variable of a flag, and REDIS_URL for --redis-url
// when RMQD_REDIS_URL is unset or empty. It returns the value and the name
// it came from.
func lookupEnv(flagName string, getenv func(string) string) (value, from string) {
	name := envName(flagName)
	if v := getenv(name); v != "" || flagName != "redis-url" {
		return v, name
	}
	return getenv(redisURLEnv), redisURLEnv
}

// parseConfig reads args and the environment. It returns flag.ErrHelp
// after printing the help for -h/--help.
func parseConfig(args []string, getenv func(string) string, out io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("rmqd", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.redisURL, "redis-url", "redis://127.0.0.1:6379/0",
		"the default pool: redis://[user:pass@]host:port/db (rediss:// for TLS) or a bare host:port; a comma-separated list of them is a cluster")
	fs.BoolVar(&c.redisCluster, "redis-cluster", false, "treat every Redis URL as a cluster seed (redis://host:port?addr=host2:port2...)")
	fs.StringVar(&c.redisTLSCA, "redis-tls-ca", "", "PEM `FILE` of the CA that signed the Redis servers' certificates, for rediss:// URLs (default: the system's roots)")
	fs.StringVar(&c.listen, "listen", "127.0.0.1:7777", "address of the API listener")
	fs.StringVar(&c.adminListen, "admin-listen", "127.0.0.1:7778", "address of the admin listener (tokens, limits, metrics)")
	fs.Var(&c.pools, "pool", "another pool as `NAME=URL`, used by tokens of the form NAME:TOKEN (repeatable; the variable takes a space-separated list)")
	fs.Var(&c.forwards, "forward", "`[POOL:]NAMESPACE/QUEUE=URL`: send the queue's jobs, when due, to a broker instead of HTTP consumers: nats://[user:pass@]host:port/SUBJECT, amqp://user:pass@host:port/vhost?exchange=E&routing_key=K, kafka://host:port[,host:port]/TOPIC (repeatable; the variable takes a space-separated list)")
	fs.StringVar(&c.prefix, "prefix", "rmq", "Redis key prefix of the queues and of rmqd's own keys")
	fs.Var(&c.accounts, "admin-account", "`USER:PASSWORD` for HTTP basic auth on the admin listener's token, limit, queue and access-log routes, dashboard and profiles (repeatable; none: open; prefer the variable, a command line is visible to every user)")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&c.accessLog, "access-log", true, "log one line per request (POST /accesslog on the admin port toggles it)")
	fs.DurationVar(&c.maxWait, "max-wait", service.DefaultMaxWait, "longest long poll: a consume's timeout is cut to this")
	fs.DurationVar(&c.cacheTTL, "cache-ttl", time.Second, "how long a valid token or a limit is cached; changes made through another rmqd take up to this long")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM, how long requests in progress may take to finish")
	fs.StringVar(&c.dashboard, "dashboard", "/dashboard/", "admin-listener `PATH` of the web dashboard of the default pool, with its token page at PATH/tokens (behind --admin-account); empty: none")
	fs.BoolVar(&c.pprof, "pprof", false, "serve Go's profiles at /debug/pprof/ on the admin listener, behind --admin-account (which it requires)")
	fs.Var(&c.adminHosts, "admin-host", "a `NAME` the admin listener answers to besides IP addresses, localhost and the host of --admin-listen: the name a proxy or browser uses (repeatable or comma-separated; * answers any name)")
	fs.IntVar(&c.authFailures, "max-auth-failures", 30, "failed basic-auth logins, and API requests with an invalid token, allowed per client address and minute (each kind; 0: unlimited); beyond: 429")
	fs.Var(&c.trustedProxies, "trusted-proxy", "`CIDR` of a proxy in front of rmqd: a request from it is counted against the client address its X-Forwarded-For names (repeatable or comma-separated)")
	c.quotas.Flags(fs)
	fs.BoolVar(&c.dev, "dev", false, "start a throwaway redis-server for the default pool (installed from the OS packages if missing); nothing is kept")

	// Usage strings get their variable; variables become the defaults.
	var envErrs []error
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "redis-url" {
			f.Usage += " (" + envName(f.Name) + ", else " + redisURLEnv + ")"
		} else {
			f.Usage += " (" + envName(f.Name) + ")"
		}
		v, name := lookupEnv(f.Name, getenv)
		if v == "" {
			return
		}
		if f.Name == "redis-url" {
			// The help shows the default: never a password.
			defer func() { f.DefValue = redact.URLs(v) }()
		}
		if multi, ok := f.Value.(interface{ SetAll(string) error }); ok {
			if err := multi.SetAll(v); err != nil {
				envErrs = append(envErrs, fmt.Errorf("%s: %w", name, err))
			}
			return
		}
		if err := f.Value.Set(v); err != nil {
			envErrs = append(envErrs, fmt.Errorf("%s=%q: %w", name, v, err))
			return
		}
		f.DefValue = v
	})
	fs.Usage = func() { printUsage(out, fs) }
	if err := errors.Join(envErrs...); err != nil {
		return c, err
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	// The values that may hold a password report their errors here, not
	// through the flag package, which would quote the value.
	if err := errors.Join(c.pools.err, c.accounts.err, c.forwards.Err); err != nil {
		return c, err
	}
	if err := checkForwardPools(&c.forwards, c.pools.list); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	switch c.logFormat {
	case "text", "json":
	default:
		return c, fmt.Errorf("--log-format %q: want text or json", c.logFormat)
	}
	if c.dashboard != "" && (!strings.HasPrefix(c.dashboard, "/") || !strings.HasSuffix(c.dashboard, "/") || c.dashboard == "/") {
		return c, fmt.Errorf("--dashboard %q: want a path like /dashboard/", c.dashboard)
	}
	if c.maxWait <= 0 || c.shutdownTimeout <= 0 || c.cacheTTL < 0 {
		return c, errors.New("--max-wait and --shutdown-timeout must be positive, --cache-ttl not negative")
	}
	if c.pprof && len(c.accounts.m) == 0 {
		return c, errors.New("--pprof needs --admin-account: profiles are served only to an admin")
	}
	if c.authFailures < 0 {
		return c, errors.New("--max-auth-failures must not be negative")
	}
	return c, nil
}

// printUsage lists the flags in the GNU form the documentation uses
// (--name; Go's flag package takes one dash or two alike).
func printUsage(out io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(out, usageHead)
	fs.VisitAll(func(f *flag.Flag) {
		typ, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if typ != "" {
			line += " " + typ
		}
		fmt.Fprintf(out, "%s\n      %s", line, usage)
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "[]" && !strings.HasSuffix(f.DefValue, " accounts") {
			fmt.Fprintf(out, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(out)
	})
}

// poolFlags collects --pool NAME=URL. A bad value is reported by
// parseConfig (err), without the value, which may hold a password.
type poolFlags struct {
	list []poolFlag
	err  error
}

type poolFlag struct{ name, url string }

func (p *poolFlags) String() string {
	parts := make([]string, len(p.list))
	for i, f := range p.list {
		parts[i] = f.name + "=" + redact.Redact(f.url)
	}
	return strings.Join(parts, " ")
}

func (p *poolFlags) Set(v string) error {
	if err := p.add(v); err != nil && p.err == nil {
		p.err = fmt.Errorf("--pool: %w", err)
	}
	return nil
}

func (p *poolFlags) add(v string) error {
	name, url, ok := strings.Cut(v, "=")
	switch {
	case !ok || url == "":
		return errors.New("want NAME=URL")
	case !names.ValidName(name):
		return fmt.Errorf("pool name %q: want [-_A-Za-z0-9]+", name)
	case name == names.DefaultPool:
		return errors.New("the default pool is --redis-url")
	}
	for _, f := range p.list {
		if f.name == name {
			return fmt.Errorf("pool %q given twice", name)
		}
	}
	p.list = append(p.list, poolFlag{name, url})
	return nil
}

func (p *poolFlags) SetAll(v string) error {
	for _, f := range strings.Fields(v) {
		if err := p.add(f); err != nil {
			return err
		}
	}
	return nil
}

// accountFlags collects --admin-account USER:PASSWORD. A bad value is
// reported by parseConfig (err), without the value.
type accountFlags struct {
	m   map[string]string
	err error
}

func (a *accountFlags) String() string { return strconv.Itoa(len(a.m)) + " accounts" }

func (a *accountFlags) Set(v string) error {
	if err := a.add(v); err != nil && a.err == nil {
		a.err = fmt.Errorf("--admin-account: %w", err)
	}
	return nil
}

func (a *accountFlags) add(v string) error {
	user, pass, ok := strings.Cut(v, ":")
	if !ok || user == "" || pass == "" {
		return errors.New("want USER:PASSWORD")
	}
	if a.m == nil {
		a.m = map[string]string{}
	}
	a.m[user] = pass
	return nil
}

func (a *accountFlags) SetAll(v string) error {
	for _, f := range strings.Fields(v) {
		if err := a.add(f); err != nil {
			return err
		}
	}
	return nil
}

// hostFlags collects --admin-host NAME.
type hostFlags []string

func (h *hostFlags) String() string { return strings.Join(*h, ",") }

func (h *hostFlags) Set(v string) error {
	for _, name := range strings.Split(v, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if name != "*" && strings.ContainsAny(name, "/ @") {
			return fmt.Errorf("%q: want a host name", name)
		}
		*h = append(*h, name)
	}
	return nil
}

func (h *hostFlags) SetAll(v string) error { return h.Set(v) }

// prefixFlags collects --trusted-proxy CIDR (a bare address is one host).
type prefixFlags []netip.Prefix

func (p *prefixFlags) String() string {
	parts := make([]string, len(*p))
	for i, x := range *p {
		parts[i] = x.String()
	}
	return strings.Join(parts, ",")
}

func (p *prefixFlags) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return fmt.Errorf("%q: want a CIDR like 10.0.0.0/8 or an address", s)
			}
			pfx = netip.PrefixFrom(a, a.BitLen())
		}
		*p = append(*p, pfx.Masked())
	}
	return nil
}

func (p *prefixFlags) SetAll(v string) error { return p.Set(v) }

// secrets lists every password of c.
func (c config) secrets() []string {
	var out []string
	for _, u := range strings.Split(c.redisURL, ",") {
		out = append(out, redact.URLSecrets(strings.TrimSpace(u))...)
	}
	for _, p := range c.pools.list {
		for _, u := range strings.Split(p.url, ",") {
			out = append(out, redact.URLSecrets(strings.TrimSpace(u))...)
		}
	}
	for _, f := range c.forwards.List {
		out = append(out, redact.URLSecrets(f.Raw)...)
	}
	for _, pass := range c.accounts.m {
		out = append(out, pass)
	}
	return out
}

// checkForwardPools refuses a forward of a pool that --pool did not define.
func checkForwardPools(f *forward.Flags, pools []poolFlag) error {
	for _, s := range f.List {
		known := s.Pool == names.DefaultPool
		for _, p := range pools {
			known = known || p.name == s.Pool
		}
		if !known {
			return fmt.Errorf("--forward %s: no pool %q (define it with --pool)", s.Name(), s.Pool)
		}
	}
	return nil
}
