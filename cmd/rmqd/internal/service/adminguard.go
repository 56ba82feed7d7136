package service

import (
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"strings"

	"github.com/rmq-go/rmq/cmd/dashboard"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/redact"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"
)

// The admin listener is reached by browsers (the dashboard) as well as by
// programs, so before any of its routes runs it refuses two things a page
// of another site could make an admin's browser do:
//
//   - A Host it does not serve. DNS rebinding points a name the attacker
//     owns at the admin listener's address: the browser then sees the
//     admin API as the attacker's own origin and lets its page read every
//     answer. Such a request names the attacker's host; rmqd answers only
//     IP addresses (a page cannot rebind a name it does not own to an
//     address it sends as Host), localhost, the host of --admin-listen and
//     the names given with --admin-host.
//   - A state-changing request (any method but GET and HEAD) sent from a
//     page of another origin: an auto-submitted form that creates a token
//     or pauses a queue with the admin's credentials. The check is the
//     dashboard's (dashboard.CrossSite): Sec-Fetch-Site, else Origin, else
//     Referer; a request with none of them comes from a program and goes
//     through, as lmstfy's clients and curl send none.
//
// Both answer 403 {"error": ...} and change nothing.

// hostPolicy is the set of host names the admin listener answers.
type hostPolicy struct {
	any   bool
	names map[string]bool // lower case, without port
}

// NewHostPolicy allows names (a "*" allows any host) besides IP addresses
// and localhost.
func NewHostPolicy(names []string) hostPolicy {
	p := hostPolicy{names: map[string]bool{"localhost": true}}
	for _, n := range names {
		if n == "*" {
			p.any = true
		}
		p.names[strings.ToLower(hostOnly(n))] = true
	}
	return p
}

// hostOnly drops a port and the brackets of an IPv6 literal.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
}

// ListenHost is the host of a listen address when it is a name (an IP
// address is always allowed; "" and ":7778" name none).
func ListenHost(addr string) []string {
	h := hostOnly(addr)
	if h == "" {
		return nil
	}
	return []string{h}
}

func (p hostPolicy) Allows(host string) bool {
	if p.any {
		return true
	}
	h := hostOnly(host)
	if h == "" {
		return false
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	return p.names[strings.ToLower(strings.TrimSuffix(h, "."))]
}

// adminGate applies both checks; false means it answered.
func (s *Service) adminGate(w http.ResponseWriter, r *http.Request) bool {
	if !s.adminHosts.Allows(r.Host) {
		respond.WriteError(w, http.StatusForbidden, "host not served: add it with --admin-host")
		return false
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if cross, _ := dashboard.CrossSite(r); cross {
			respond.WriteError(w, http.StatusForbidden, "cross-site request refused")
			return false
		}
	}
	return true
}

// RegisterPprof serves Go's profiles under /debug/pprof/ on mux when
// cfg.Pprof is set, behind the admin accounts (config refuses --pprof
// without one): a profile shows the program's inner workings and asking
// for one costs CPU. The command line is shown with its credentials
// redacted. Never on http.DefaultServeMux, which the API listener must
// not expose.
func (s *Service) RegisterPprof(mux *http.ServeMux) {
	if !s.Cfg.Pprof {
		return
	}
	auth := s.BasicAuth
	mux.Handle("GET /debug/pprof/", auth(pprof.Index))
	mux.Handle("GET /debug/pprof/cmdline", auth(s.serveCmdline))
	mux.Handle("GET /debug/pprof/profile", auth(pprof.Profile))
	mux.Handle("GET /debug/pprof/symbol", auth(pprof.Symbol))
	mux.Handle("POST /debug/pprof/symbol", auth(pprof.Symbol))
	mux.Handle("GET /debug/pprof/trace", auth(pprof.Trace))
}

// serveCmdline is pprof's /debug/pprof/cmdline with the credentials
// redacted: the arguments, NUL-separated.
func (s *Service) serveCmdline(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, s.redact.String(strings.Join(redact.Args(os.Args), "\x00")))
}
