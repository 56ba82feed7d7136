package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"

	"github.com/rmq-go/rmq/internal/testkit/redisserver"
)

// startDevRedis starts a throwaway redis-server for --dev: a loopback port,
// a temporary directory, no persistence; it installs Debian's package first
// when redis-server is missing (as scripts/demo.sh does). The stop function
// kills it and removes its directory.
//
// It is a flag and not a script so that one command works from any
// directory with Go alone (go run ./cmd/rmqd --dev), and the server's life
// is tied to rmqd's: it goes when rmqd goes, even after a crash (it is
// started with a parent-death signal on Linux).
func startDevRedis(ctx context.Context, log *slog.Logger) (url string, stop func(), err error) {
	logf := func(format string, args ...any) { log.Info(fmt.Sprintf(format, args...)) }
	if err := redisserver.EnsureInstalled(ctx, logf); err != nil {
		return "", nil, err
	}
	srv, err := redisserver.Start(ctx, redisserver.Config{Logf: logf})
	if err != nil {
		return "", nil, err
	}
	log.Warn("rmqd: --dev: using a throwaway redis-server; everything is lost when rmqd stops", "redis", srv.Addr())
	return "redis://" + srv.Addr() + "/0", func() {
		if err := srv.Stop(); err != nil {
			log.Warn("rmqd: stop the --dev redis-server", "err", err)
		}
	}, nil
}

// printDevBanner tells the user of --dev, once both listeners accept, the
// addresses to use: the redis-server's port is a free one, different on
// every start, and a log line is easy to miss among the others. It is
// written to stdout (the log goes to stderr), so a script can read it, and
// the README's tests wait for it as the sign that rmqd is ready.
func printDevBanner(w io.Writer, api, admin net.Addr, redisURL, dashboard string) {
	apiURL, adminURL := "http://"+dialable(api), "http://"+dialable(admin)
	fmt.Fprintf(w, "rmqd --dev is ready; everything is lost when it stops.\n")
	fmt.Fprintf(w, "  API        %s\n", apiURL)
	fmt.Fprintf(w, "  admin      %s\n", adminURL)
	if dashboard != "" {
		fmt.Fprintf(w, "  dashboard  %s%s\n", adminURL, dashboard)
	}
	fmt.Fprintf(w, "  Redis      %s\n", redisURL)
	fmt.Fprintf(w, "Point rmqctl (and the examples) at this Redis from another shell:\n")
	fmt.Fprintf(w, "  export REDIS_URL=%s\n", redisURL)
	fmt.Fprintf(w, "  go run ./cmd/rmqctl topics    # from the repository's root\n")
}

// dialable is a listener's address as a client dials it: an unspecified
// host (0.0.0.0, ::) becomes the loopback address of its family.
func dialable(a net.Addr) string {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return a.String()
	}
	if ap.Addr().IsUnspecified() {
		lo := netip.AddrFrom4([4]byte{127, 0, 0, 1})
		if ap.Addr().Is6() && !ap.Addr().Is4In6() {
			lo = netip.IPv6Loopback()
		}
		ap = netip.AddrPortFrom(lo, ap.Port())
	}
	return ap.String()
}
