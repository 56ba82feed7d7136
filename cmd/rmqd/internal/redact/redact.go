package redact

import (
	"bytes"
	"io"
	"net/url"
	"sort"
	"strings"
)

// Credentials rmqd is given (the passwords of Redis URLs and of the admin
// accounts) are never shown: not by a route, not in a log line, not in an
// error. Each place that prints a URL or an argument redacts it (redact,
// redactArgs); on top of that every line rmqd logs goes through a
// redactor that replaces any of the passwords it still finds, so a
// message of a dependency that quotes a URL cannot leak one either.

// URLs is redact for a comma-separated list of URLs.
func URLs(v string) string {
	parts := strings.Split(v, ",")
	for i, p := range parts {
		parts[i] = Redact(p)
	}
	return strings.Join(parts, ",")
}

// Redact hides the credentials of every URL in s, whatever the scheme:
// the password of user:password@, a user without a password (NATS takes
// a token as nats://TOKEN@host), and the value of a query parameter that
// names a secret (password=, token=, ...; see secretParam). It is the one
// redaction of URLs: the routes and pages that show a forward or a pool,
// the errors and log lines that quote a URL, pprof's command line.
// Text without "://" comes back as it is.
func Redact(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	var b strings.Builder
	forEachURL(s, func(text, rest string) {
		b.WriteString(text)
		b.WriteString(redactOne(rest))
	})
	return b.String()
}

// urlEnd are the bytes that end a URL quoted in text (a message, a list).
const urlEnd = " \t\r\n\"'<>`,;"

// forEachURL calls f for each stretch of s: text up to and including a
// "://", then the URL's rest up to the next urlEnd byte ("" for the
// text after the last URL).
func forEachURL(s string, f func(text, rest string)) {
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			f(s, "")
			return
		}
		text := s[:i+3]
		s = s[i+3:]
		end := strings.IndexAny(s, urlEnd)
		if end < 0 {
			end = len(s)
		}
		f(text, s[:end])
		s = s[end:]
	}
}

// urlParts splits the rest of a URL after "://" into its credentials
// (what precedes the last "@" of the authority, "" without one), the host
// part, and what follows (path, query, fragment).
func urlParts(rest string) (cred, host, tail string, hasCred bool) {
	authEnd := strings.IndexAny(rest, "/?#")
	if authEnd < 0 {
		authEnd = len(rest)
	}
	authority, tail := rest[:authEnd], rest[authEnd:]
	at := strings.LastIndexByte(authority, '@')
	if at < 0 {
		return "", authority, tail, false
	}
	return authority[:at], authority[at+1:], tail, true
}

// secretParam reports whether a query parameter's name names a secret.
func secretParam(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"pass", "pwd", "token", "secret", "key", "auth", "cred", "jwt", "seed"} {
		if strings.Contains(n, w) && n != "routing_key" {
			return true
		}
	}
	return false
}

// redactOne is redact for one URL's rest after "://".
func redactOne(rest string) string {
	cred, host, tail, hasCred := urlParts(rest)
	out := host
	if hasCred {
		if user, _, hasPass := strings.Cut(cred, ":"); hasPass {
			out = user + ":***@" + host
		} else {
			out = "***@" + host
		}
	}
	path, query, hasQuery := strings.Cut(tail, "?")
	if !hasQuery {
		return out + tail
	}
	query, frag, hasFrag := strings.Cut(query, "#")
	params := strings.Split(query, "&")
	for i, p := range params {
		if name, v, ok := strings.Cut(p, "="); ok && v != "" && secretParam(unescapeOrSelf(name)) {
			params[i] = name + "=***"
		}
	}
	out += path + "?" + strings.Join(params, "&")
	if hasFrag {
		out += "#" + frag
	}
	return out
}

func unescapeOrSelf(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}

// URLSecrets returns the secrets redact hides in the URLs of u, each as
// written and as decoded, for the log redactor.
func URLSecrets(u string) []string {
	var out []string
	add := func(v string, unescape func(string) (string, error)) {
		if v == "" {
			return
		}
		out = append(out, v)
		if dec, err := unescape(v); err == nil && dec != v {
			out = append(out, dec)
		}
	}
	forEachURL(u, func(_, rest string) {
		if rest == "" {
			return
		}
		cred, _, tail, hasCred := urlParts(rest)
		if hasCred {
			if _, pass, hasPass := strings.Cut(cred, ":"); hasPass {
				add(pass, url.PathUnescape)
			} else {
				add(cred, url.PathUnescape)
			}
		}
		if _, query, ok := strings.Cut(tail, "?"); ok {
			query, _, _ = strings.Cut(query, "#")
			for _, p := range strings.Split(query, "&") {
				if name, v, ok := strings.Cut(p, "="); ok && secretParam(unescapeOrSelf(name)) {
					add(v, url.QueryUnescape)
				}
			}
		}
	})
	return out
}

// minRedacted is the shortest password the redactor looks for in log
// lines: a shorter one would blank out ordinary words ("rmq") without
// protecting much. The routes and messages that print a URL or an
// argument redact passwords of any length.
const minRedacted = 4

// Redactor replaces known passwords by "***".
type Redactor struct {
	secrets [][]byte // longest first, so a password containing another goes whole
}

func New(secrets []string) *Redactor {
	r := &Redactor{}
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
func (r *Redactor) bytes(p []byte) []byte {
	for _, s := range r.secrets {
		if bytes.Contains(p, s) {
			p = bytes.ReplaceAll(p, s, []byte("***"))
		}
	}
	return p
}

func (r *Redactor) String(s string) string { return string(r.bytes([]byte(s))) }

// Writer returns w behind the redactor (w itself when there is nothing to
// redact). Each Write is one log line or a batch of whole lines (slog
// writes a record with one call; bufferedLog flushes whole records).
func (r *Redactor) Writer(w io.Writer) io.Writer {
	if len(r.secrets) == 0 {
		return w
	}
	return redactWriter{w, r}
}

type redactWriter struct {
	w io.Writer
	r *Redactor
}

func (rw redactWriter) Write(p []byte) (int, error) {
	if _, err := rw.w.Write(rw.r.bytes(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Args returns a command line with the values of --redis-url,
// --pool, --forward and --admin-account redacted (in the forms "--flag value",
// "--flag=value", one dash or two).
func Args(args []string) []string {
	out := make([]string, len(args))
	copy(out, args)
	redactValue := func(flag, v string) string {
		switch flag {
		case "redis-url":
			return URLs(v)
		case "pool":
			name, u, _ := strings.Cut(v, "=")
			return name + "=" + URLs(u)
		case "forward":
			spec, u, _ := strings.Cut(v, "=")
			return spec + "=" + Redact(u)
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
