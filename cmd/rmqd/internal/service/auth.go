package service

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"
)

// queueReq is a queue route's request after the common checks.
type queueReq struct {
	pool  *Pool
	ns, q string   // q is the raw queue part on the consume route ("q1,q2")
	token string   // without its pool prefix; "" on public routes
	ref   TokenRef // the token's; zero on public routes
	id    string   // the {id} of the job routes
}

type queueHandler func(w http.ResponseWriter, r *http.Request, qr *queueReq)

type throttleKind int

const (
	throttleNone throttleKind = iota
	throttleRead
	throttleWrite
)

type routeOpts struct {
	public   bool // no token needed (size routes)
	consume  bool // the consume route's laxer name rule
	throttle throttleKind
}

// requestToken is X-Token, or ?token= only when the header is absent or
// empty (a wrong header is not rescued by a right query).
func requestToken(r *http.Request) string {
	if t := r.Header.Get("X-Token"); t != "" {
		return t
	}
	return r.URL.Query().Get("token")
}

// queueRoute runs the checks every queue route shares, in lmstfy's order
// (LMSTFY-API.md §2): names (400), the pool of the token's prefix (404),
// the token (401), the throttle (429); then the handler. A throttled
// request that ends with another status than 200/201 gives its unit back.
func (s *Service) queueRoute(o routeOpts, h queueHandler) queueRoute {
	return func(w http.ResponseWriter, r *http.Request, ns, q, id string) {
		if o.consume && r.Method == http.MethodHead {
			// The router answers HEAD on GET routes; a consume is not a
			// read: it would lease jobs (and spend their tries) to answer
			// a request that gets no body.
			w.Header().Set("Allow", http.MethodGet)
			respond.WriteError(w, http.StatusMethodNotAllowed, "method not allowed")
			return
		}
		if o.consume {
			if msg := names.ConsumeNameErr(ns, q); msg != "" {
				respond.WriteError(w, http.StatusBadRequest, msg)
				return
			}
		} else if msg := names.NameErr(ns, q); msg != "" {
			respond.WriteError(w, http.StatusBadRequest, msg)
			return
		}
		raw := requestToken(r)
		poolName, token := names.SplitToken(raw)
		p, ok := s.Pools[poolName]
		if !ok {
			respond.WriteError(w, http.StatusNotFound, "pool not found")
			return
		}
		qr := &queueReq{pool: p, ns: ns, q: q, id: id}
		if !o.public {
			if raw == "" {
				respond.WriteError(w, http.StatusUnauthorized, "token not found")
				return
			}
			ref := TokenRef{poolName, ns, token}
			if !s.checkToken(w, r, ref) {
				return
			}
			qr.token = token
			qr.ref = ref
			if o.consume && longPoll(r) {
				release, err := s.pollCaps.poll(ref)
				if err != nil {
					writePollRefused(w, err)
					return
				}
				defer release()
				// A long poll ends when its token is deleted (tokenwatch.go).
				ctx, unwatch := s.watch.watch(r.Context(), ref)
				defer unwatch()
				r = r.WithContext(ctx)
			}
		}
		if o.throttle != throttleNone {
			giveBack, ok := s.throttled(w, r, TokenRef{poolName, ns, token}, o.throttle)
			if !ok {
				return
			}
			if giveBack != nil {
				defer func() {
					if st := respond.StatusOf(w); st != http.StatusOK && st != http.StatusCreated {
						// The request's own context may be gone (client left).
						ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
						defer cancel()
						if err := giveBack(ctx); err != nil {
							s.log.WarnContext(ctx, "rmqd: could not give back a throttle unit", "request_id", respond.RequestID(w), "err", err)
						}
					}
				}()
			}
		}
		h(w, r, qr)
	}
}

// checkToken looks the token up behind the guard (guard.go); false means
// the answer (401, 429 or 500) was written.
func (s *Service) checkToken(w http.ResponseWriter, r *http.Request, ref TokenRef) bool {
	addr := s.guard.ClientAddr(r)
	if refused, retry := s.guard.refused(guardToken, addr); refused && !s.guard.tokenKnown(addr, ref) {
		writeGuessRefused(w, guardToken, retry)
		return false
	}
	valid, err := s.tokens.valid(r.Context(), ref.pool, ref.ns, ref.token)
	if err != nil {
		s.writeInternal(w, r, fmt.Errorf("token lookup: %w", err))
		return false
	}
	if !valid {
		refuse, retry, err := s.guard.failed(r.Context(), guardToken, addr)
		switch {
		case err != nil:
			s.writeInternal(w, r, fmt.Errorf("count a failed token: %w", err))
		case refuse:
			writeGuessRefused(w, guardToken, retry)
		default:
			respond.WriteError(w, http.StatusUnauthorized, "invalid token")
		}
		return false
	}
	s.guard.tokenOK(addr, ref)
	return true
}

// longPoll reports whether a consume asks to wait (timeout > 0).
func longPoll(r *http.Request) bool {
	if !strings.Contains(r.URL.RawQuery, "timeout") {
		return false
	}
	t := r.URL.Query().Get("timeout")
	return t != "" && strings.Trim(t, "0") != ""
}

// throttled takes a unit of the token's limit; ok false means the answer
// (429 or 500) was written.
func (s *Service) throttled(w http.ResponseWriter, r *http.Request, ref TokenRef, kind throttleKind) (giveBack func(context.Context) error, ok bool) {
	l, found, err := s.limits.get(r.Context(), ref.pool, ref.ns, ref.token)
	if err != nil {
		s.writeInternal(w, r, fmt.Errorf("limit lookup: %w", err))
		return nil, false
	}
	if !found {
		return nil, true
	}
	sd, verb := ReadSide, "consume"
	if kind == throttleWrite {
		sd, verb = WriteSide, "produce"
	}
	allowed, giveBack, err := s.throttle.Take(r.Context(), ref, l, sd)
	if err != nil {
		s.writeInternal(w, r, fmt.Errorf("throttle: %w", err))
		return nil, false
	}
	if !allowed {
		if sd == ReadSide {
			s.metrics.ThrottledRead.Add(1)
		} else {
			s.metrics.ThrottledWrite.Add(1)
		}
		respond.WriteJSON(w, http.StatusTooManyRequests, respond.MsgBody{Msg: fmt.Sprintf("token(%s) %s reach the limit rate, please retry later", ref.token, verb)})
		return nil, false
	}
	return giveBack, true
}

// basicAuth guards an admin route when accounts are configured (§8.4).
func (s *Service) basicAuth(h http.HandlerFunc) http.Handler { return s.requireAccount(h) }

// requireAccount is basicAuth as middleware (the dashboard's WithAuth).
// Failed logins are counted per client address (guard.go): beyond the
// allowance the address gets 429 and its credentials are not checked. A
// request without credentials (a browser's first, before it asks the
// user) is not a failure.
func (s *Service) requireAccount(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(s.cfg.Accounts) > 0 {
			user, pass, given := r.BasicAuth()
			if !given {
				askForLogin(w)
				return
			}
			addr := s.guard.ClientAddr(r)
			ok := s.accountOK(user, pass)
			known := loginRef(user, pass)
			if refused, retry := s.guard.refused(guardLogin, addr); refused && !(ok && s.guard.tokenKnown(addr, known)) {
				writeGuessRefused(w, guardLogin, retry)
				return
			}
			if ok {
				s.guard.tokenOK(addr, known)
			}
			if !ok {
				refuse, retry, err := s.guard.failed(r.Context(), guardLogin, addr)
				switch {
				case err != nil:
					s.writeInternal(w, r, fmt.Errorf("count a failed login: %w", err))
				case refuse:
					writeGuessRefused(w, guardLogin, retry)
				default:
					askForLogin(w)
				}
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// loginRef names an account's credentials in the guard's memory of what
// succeeded from an address (as a token is named there): while an address
// is refused for failed logins, credentials that succeeded from it in the
// last knownTTL still open (a browser sends them with every request, so an
// admin at work keeps working while someone behind the same address
// guesses); any other login from it, right or wrong, waits. Only a digest
// of the password is kept.
func loginRef(user, pass string) TokenRef {
	sum := sha256.Sum256([]byte(user + "\x00" + pass))
	return TokenRef{pool: "\x00login", ns: user, token: string(sum[:])}
}

// askForLogin answers 401 with an empty body, as lmstfy does (§8.4).
func askForLogin(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Basic realm="Authorization Required"`)
	w.WriteHeader(http.StatusUnauthorized)
}

func (s *Service) accountOK(user, pass string) bool {
	want, known := s.cfg.Accounts[user]
	// Compare digests, and even for an unknown user, so that the time
	// tells neither the password's length nor whether the user exists.
	a, b := sha256.Sum256([]byte(pass)), sha256.Sum256([]byte(want))
	match := subtle.ConstantTimeCompare(a[:], b[:]) == 1
	return known && match
}
