// Package redisaddr reads a Redis address the one way every program of
// the project takes it (rmqd's --redis-url and pools, rmqctl's REDIS_URL):
// a URL (redis://, rediss:// for TLS, unix://) or a bare HOST:PORT for one
// server; a comma-separated list of them for a Redis Cluster's seeds.
package redisaddr

import (
	"errors"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrInvalid is wrapped by every error of Parse.
var ErrInvalid = errors.New("invalid Redis address")

// PartError is Parse's error: Part is the address of the list that could
// not be read, as given (it may hold a password: a caller that prints it
// redacts it; Err never quotes it).
type PartError struct {
	Part string
	Err  error
}

func (e *PartError) Error() string { return e.Err.Error() }

func (e *PartError) Unwrap() []error { return []error{ErrInvalid, e.Err} }

// Parse reads v. One address is one server unless cluster is set; a
// comma-separated list is a cluster's seeds, the first giving the options
// (password, TLS ...) and the others only their HOST:PORT. Exactly one of
// single and clus is set when err is nil.
func Parse(v string, cluster bool) (single *redis.Options, clus *redis.ClusterOptions, err error) {
	parts := strings.Split(v, ",")
	first := strings.TrimSpace(parts[0])
	if len(parts) == 1 && !cluster {
		if !strings.Contains(first, "://") {
			if err := hostPort(first); err != nil {
				return nil, nil, err
			}
			return &redis.Options{Addr: first}, nil, nil
		}
		o, err := redis.ParseURL(first)
		if err != nil {
			return nil, nil, &PartError{first, scrub(err, first)}
		}
		return o, nil, nil
	}
	if !strings.Contains(first, "://") {
		if err := hostPort(first); err != nil {
			return nil, nil, err
		}
		first = "redis://" + first
	}
	opts, err := redis.ParseClusterURL(first)
	if err != nil {
		return nil, nil, &PartError{first, scrub(err, first)}
	}
	for _, p := range parts[1:] {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if !strings.Contains(p, "://") {
			if err := hostPort(p); err != nil {
				return nil, nil, err
			}
			opts.Addrs = append(opts.Addrs, p)
			continue
		}
		o, err := redis.ParseURL(p)
		if err != nil {
			return nil, nil, &PartError{p, scrub(err, p)}
		}
		opts.Addrs = append(opts.Addrs, o.Addr)
	}
	return nil, opts, nil
}

// hostPort checks a bare address.
func hostPort(s string) error {
	if host, port, err := net.SplitHostPort(s); err != nil || host == "" || port == "" {
		return &PartError{s, errors.New("want redis://[USER:PASSWORD@]HOST:PORT[/DB], rediss://…, unix://PATH or HOST:PORT")}
	}
	return nil
}

// scrub drops the address from a parser's message (url.Parse quotes it).
func scrub(err error, part string) error {
	msg := strings.ReplaceAll(err.Error(), part, "…")
	return errors.New(msg)
}
