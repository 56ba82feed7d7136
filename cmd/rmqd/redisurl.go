package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/cmd/internal/redisaddr"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/redact"
)

// newRedis opens a client for a pool's address as every program reads
// it (redisaddr): redis:// or rediss:// (TLS) URL or a bare HOST:PORT for
// one node; a comma-separated list, or any address when cluster is set,
// for a cluster (extra seeds also as ?addr=host:port). roots, if not nil,
// verify the servers of rediss:// URLs.
func newRedis(url string, cluster bool, roots *x509.CertPool) (redis.UniversalClient, error) {
	single, opts, err := redisaddr.Parse(url, cluster)
	if err != nil {
		var pe *redisaddr.PartError
		if errors.As(err, &pe) {
			return nil, urlError(pe.Part, pe.Err)
		}
		return nil, err
	}
	if opts != nil {
		opts.DisableIdentity = true
		withRoots(opts.TLSConfig, roots)
		return redis.NewClusterClient(opts), nil
	}
	// Redis 7.0 does not know CLIENT SETINFO; skip it.
	single.DisableIdentity = true
	withRoots(single.TLSConfig, roots)
	return redis.NewClient(single), nil
}

func withRoots(tc *tls.Config, roots *x509.CertPool) {
	if tc != nil && roots != nil {
		tc.RootCAs = roots
	}
}

// loadRoots reads --redis-tls-ca; "" keeps the system's roots (nil).
func loadRoots(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--redis-tls-ca: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, errors.New("--redis-tls-ca " + file + ": no PEM certificate in it")
	}
	return roots, nil
}

// urlError reports a URL that could not be parsed. The parser's message
// may quote the URL: its password is replaced there too, whatever its
// length.
func urlError(u string, err error) error {
	msg := err.Error()
	for _, pass := range redact.URLSecrets(u) {
		msg = strings.ReplaceAll(msg, pass, "***")
	}
	return fmt.Errorf("redis URL %q: %s", redact.Redact(u), msg)
}
