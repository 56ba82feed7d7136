package main

import (
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// newRedis opens a client for a pool URL: redis:// or rediss:// (TLS) for
// one node; a comma-separated list of URLs, or any URL when cluster is
// set, for a cluster (ParseClusterURL: extra seeds as ?addr=host:port).
func newRedis(url string, cluster bool) (redis.UniversalClient, error) {
	if strings.Contains(url, ",") || cluster {
		parts := strings.Split(url, ",")
		opts, err := redis.ParseClusterURL(strings.TrimSpace(parts[0]))
		if err != nil {
			return nil, fmt.Errorf("redis URL %q: %w", redact(parts[0]), err)
		}
		for _, p := range parts[1:] {
			p = strings.TrimSpace(p)
			if !strings.Contains(p, "://") {
				opts.Addrs = append(opts.Addrs, p)
				continue
			}
			o, err := redis.ParseURL(p)
			if err != nil {
				return nil, fmt.Errorf("redis URL %q: %w", redact(p), err)
			}
			opts.Addrs = append(opts.Addrs, o.Addr)
		}
		opts.DisableIdentity = true
		return redis.NewClusterClient(opts), nil
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis URL %q: %w", redact(url), err)
	}
	// Redis 7.0 does not know CLIENT SETINFO; skip it.
	opts.DisableIdentity = true
	return redis.NewClient(opts), nil
}

// redact hides a URL's password in messages.
func redact(url string) string {
	scheme, rest, ok := strings.Cut(url, "://")
	if !ok {
		return url
	}
	cred, host, ok := strings.Cut(rest, "@")
	if !ok {
		return url
	}
	if user, _, hasPass := strings.Cut(cred, ":"); hasPass {
		return scheme + "://" + user + ":***@" + host
	}
	return url
}
