package main

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
)

// Credentials rmqd is given (the passwords of Redis URLs and of the admin
// accounts) are never shown: not by a route, not in a log line, not in an
// error. Each place that prints a URL or an argument redacts it (redact,
// redactArgs); on top of that every line rmqd logs goes through a
// redactor that replaces any of the passwords it still finds, so a
// message of a dependency that quotes a URL cannot leak one either.

// redactURLs is redact for a comma-separated list of URLs.
func redactURLs(v string) string {
	parts := strings.Split(v, ",")
	for i, p := range parts {
		parts[i] = redact(p)
	}
	return strings.Join(parts, ",")
}

// urlPassword returns the password of a Redis URL as written and as
// decoded ("" when it has none).
func urlPassword(u string) []string {
	_, rest, ok := strings.Cut(u, "://")
	if !ok {
		return nil
	}
	cred, _, ok := strings.Cut(rest, "@")
	if !ok {
		return nil
	}
	_, pass, ok := strings.Cut(cred, ":")
	if !ok || pass == "" {
		return nil
	}
	out := []string{pass}
	if dec, err := url.PathUnescape(pass); err == nil && dec != pass {
		out = append(out, dec)
	}
	return out
}

// secrets lists every password of c.
func (c config) secrets() []string {
	var out []string
	for _, u := range strings.Split(c.redisURL, ",") {
		out = append(out, urlPassword(strings.TrimSpace(u))...)
	}
	for _, p := range c.pools.list {
		for _, u := range strings.Split(p.url, ",") {
			out = append(out, urlPassword(strings.TrimSpace(u))...)
		}
	}
	for _, f := range c.forwards.list {
		out = append(out, urlPassword(f.raw)...)
	}
	for _, pass := range c.accounts.m {
		out = append(out, pass)
	}
	return out
}

// minRedacted is the shortest password the redactor looks for in log
// lines: a shorter one would blank out ordinary words ("rmq") without
// protecting much. The routes and messages that print a URL or an
// argument redact passwords of any length.
const minRedacted = 4

// redactor replaces known passwords by "***".
type redactor struct {
	secrets [][]byte // longest first, so a password containing another goes whole
}

func newRedactor(secrets []string) *redactor {
	r := &redactor{}
	seen := map[string]bool{}
	for _, s := range secrets {
		if len(s) >= minRedacted && !seen[s] {
			seen[s] = true
			r.secrets = append(r.secrets, []byte(s))
		}
	}
	sort.Slice(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
	return r
}

// bytes returns p with every password replaced; p itself when none is in it.
func (r *redactor) bytes(p []byte) []byte {
	for _, s := range r.secrets {
		if bytes.Contains(p, s) {
			p = bytes.ReplaceAll(p, s, []byte("***"))
		}
	}
	return p
}

func (r *redactor) string(s string) string { return string(r.bytes([]byte(s))) }

// writer returns w behind the redactor (w itself when there is nothing to
// redact). Each Write is one log line or a batch of whole lines (slog
// writes a record with one call; bufferedLog flushes whole records).
func (r *redactor) writer(w io.Writer) io.Writer {
	if len(r.secrets) == 0 {
		return w
	}
	return redactWriter{w, r}
}

type redactWriter struct {
	w io.Writer
	r *redactor
}

func (rw redactWriter) Write(p []byte) (int, error) {
	if _, err := rw.w.Write(rw.r.bytes(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// redactArgs returns a command line with the values of --redis-url,
// --pool, --forward and --admin-account redacted (in the forms "--flag value",
// "--flag=value", one dash or two).
func redactArgs(args []string) []string {
	out := make([]string, len(args))
	copy(out, args)
	redactValue := func(flag, v string) string {
		switch flag {
		case "redis-url":
			return redactURLs(v)
		case "pool":
			name, u, _ := strings.Cut(v, "=")
			return name + "=" + redactURLs(u)
		case "forward":
			spec, u, _ := strings.Cut(v, "=")
			return spec + "=" + redact(u)
		case "admin-account":
			user, _, _ := strings.Cut(v, ":")
			return user + ":***"
		}
		return v
	}
	for i := 0; i < len(out); i++ {
		a := out[i]
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name := strings.TrimLeft(a, "-")
		if n, v, ok := strings.Cut(name, "="); ok {
			if r := redactValue(n, v); r != v {
				out[i] = a[:len(a)-len(v)] + r
			}
			continue
		}
		if i+1 < len(out) {
			if r := redactValue(name, out[i+1]); r != out[i+1] {
				out[i+1] = r
				i++
			}
		}
	}
	return out
}

// serveCmdline is pprof's /debug/pprof/cmdline with the credentials
// redacted: the arguments, NUL-separated.
func (s *service) serveCmdline(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, s.redact.string(strings.Join(redactArgs(os.Args), "\x00")))
}
