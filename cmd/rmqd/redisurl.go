package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
)

// newRedis opens a client for a pool URL: redis:// or rediss:// (TLS) for
// one node; a comma-separated list of URLs, or any URL when cluster is
// set, for a cluster (ParseClusterURL: extra seeds as ?addr=host:port).
// roots, if not nil, verify the servers of rediss:// URLs.
func newRedis(url string, cluster bool, roots *x509.CertPool) (redis.UniversalClient, error) {
	if strings.Contains(url, ",") || cluster {
		parts := strings.Split(url, ",")
		opts, err := redis.ParseClusterURL(strings.TrimSpace(parts[0]))
		if err != nil {
			return nil, urlError(parts[0], err)
		}
		for _, p := range parts[1:] {
			p = strings.TrimSpace(p)
			if !strings.Contains(p, "://") {
				opts.Addrs = append(opts.Addrs, p)
				continue
			}
			o, err := redis.ParseURL(p)
			if err != nil {
				return nil, urlError(p, err)
			}
			opts.Addrs = append(opts.Addrs, o.Addr)
		}
		opts.DisableIdentity = true
		withRoots(opts.TLSConfig, roots)
		return redis.NewClusterClient(opts), nil
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, urlError(url, err)
	}
	// Redis 7.0 does not know CLIENT SETINFO; skip it.
	opts.DisableIdentity = true
	withRoots(opts.TLSConfig, roots)
	return redis.NewClient(opts), nil
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
	for _, pass := range urlSecrets(u) {
		msg = strings.ReplaceAll(msg, pass, "***")
	}
	return fmt.Errorf("redis URL %q: %s", redact(u), msg)
}
