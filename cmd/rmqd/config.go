package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// config is rmqd's command line. Every flag can also come from an
// environment variable named RMQD_ and the flag in upper snake case; a flag
// on the command line wins over the variable.
type config struct {
	redisURL        string
	redisCluster    bool
	redisTLSCA      string
	listen          string
	adminListen     string
	pools           poolFlags
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

// parseConfig reads args and the environment. It returns flag.ErrHelp
// after printing the help for -h/--help.
func parseConfig(args []string, getenv func(string) string, out io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("rmqd", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.redisURL, "redis-url", "redis://127.0.0.1:6379/0",
		"the default pool: redis://[user:pass@]host:port/db (rediss:// for TLS); a comma-separated list of URLs is a cluster")
	fs.BoolVar(&c.redisCluster, "redis-cluster", false, "treat every Redis URL as a cluster seed (redis://host:port?addr=host2:port2...)")
	fs.StringVar(&c.redisTLSCA, "redis-tls-ca", "", "PEM `FILE` of the CA that signed the Redis servers' certificates, for rediss:// URLs (default: the system's roots)")
	fs.StringVar(&c.listen, "listen", "127.0.0.1:7777", "address of the API listener")
	fs.StringVar(&c.adminListen, "admin-listen", "127.0.0.1:7778", "address of the admin listener (tokens, limits, metrics)")
	fs.Var(&c.pools, "pool", "another pool as `NAME=URL`, used by tokens of the form NAME:TOKEN (repeatable; the variable takes a space-separated list)")
	fs.StringVar(&c.prefix, "prefix", "rmq", "Redis key prefix of the queues and of rmqd's own keys")
	fs.Var(&c.accounts, "admin-account", "`USER:PASSWORD` for HTTP basic auth on the admin token and limit routes (repeatable; none: open)")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&c.accessLog, "access-log", true, "log one line per request (POST /accesslog on the admin port toggles it)")
	fs.DurationVar(&c.maxWait, "max-wait", defaultMaxWait, "longest long poll: a consume's timeout is cut to this")
	fs.DurationVar(&c.cacheTTL, "cache-ttl", time.Second, "how long a valid token or a limit is cached; changes made through another rmqd take up to this long")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM, how long requests in progress may take to finish")
	fs.StringVar(&c.dashboard, "dashboard", "/dashboard/", "admin-listener `PATH` of the web dashboard of the default pool, and of its token page at PATH/../dashboard-tokens (behind --admin-account); empty: none")
	fs.BoolVar(&c.dev, "dev", false, "start a throwaway redis-server for the default pool (installed from the OS packages if missing); nothing is kept")

	// Usage strings get their variable; variables become the defaults.
	var envErrs []error
	fs.VisitAll(func(f *flag.Flag) {
		name := envName(f.Name)
		f.Usage += " (" + name + ")"
		v := getenv(name)
		if v == "" {
			return
		}
		if multi, ok := f.Value.(interface{ setAll(string) error }); ok {
			if err := multi.setAll(v); err != nil {
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

// poolFlags collects --pool NAME=URL.
type poolFlags []poolFlag

type poolFlag struct{ name, url string }

func (p *poolFlags) String() string {
	parts := make([]string, len(*p))
	for i, f := range *p {
		parts[i] = f.name + "=" + f.url
	}
	return strings.Join(parts, " ")
}

func (p *poolFlags) Set(v string) error {
	name, url, ok := strings.Cut(v, "=")
	switch {
	case !ok || url == "":
		return errors.New("want NAME=URL")
	case !validName(name):
		return fmt.Errorf("pool name %q: want [-_A-Za-z0-9]+", name)
	case name == defaultPool:
		return errors.New("the default pool is --redis-url")
	}
	for _, f := range *p {
		if f.name == name {
			return fmt.Errorf("pool %q given twice", name)
		}
	}
	*p = append(*p, poolFlag{name, url})
	return nil
}

func (p *poolFlags) setAll(v string) error {
	for _, f := range strings.Fields(v) {
		if err := p.Set(f); err != nil {
			return err
		}
	}
	return nil
}

// accountFlags collects --admin-account USER:PASSWORD.
type accountFlags map[string]string

func (a *accountFlags) String() string { return strconv.Itoa(len(*a)) + " accounts" }

func (a *accountFlags) Set(v string) error {
	user, pass, ok := strings.Cut(v, ":")
	if !ok || user == "" || pass == "" {
		return errors.New("want USER:PASSWORD")
	}
	if *a == nil {
		*a = accountFlags{}
	}
	(*a)[user] = pass
	return nil
}

func (a *accountFlags) setAll(v string) error {
	for _, f := range strings.Fields(v) {
		if err := a.Set(f); err != nil {
			return err
		}
	}
	return nil
}
