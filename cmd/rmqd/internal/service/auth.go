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

	"github.com/rmq-go/rmq/cmd/rmqd/internal/auth"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/pull"
)

// QueueReq is a queue route's request after the common checks.
type QueueReq struct {
	Pool  *pull.Pool
	Ns, Q string        // q is the raw queue part on the consume route ("q1,q2")
	Token string        // without its pool prefix; "" on public routes
	Ref   auth.TokenRef // the token's; zero on public routes
	ID    string        // the {id} of the job routes
}

type QueueHandler func(w http.ResponseWriter, r *http.Request, qr *QueueReq)

type throttleKind int

const (
	throttleNone throttleKind = iota
	ThrottleRead
	ThrottleWrite
)

type RouteOpts struct {
	Public   bool // no token needed (size routes)
	Consume  bool // the consume route's laxer name rule
	Throttle throttleKind
	// LongPoll: with ?timeout= above 0 the request is a long poll as a
	// waiting consume is (counted by the poll caps, ended when its token
	// is deleted): the wait for a job's end.
	LongPoll bool
	// Stream: every request is held as a long poll is (an event stream).
	Stream bool
}

// requestToken is X-Token, or ?token= only when the header is absent or
// empty (a wrong header is not rescued by a right query).
func requestToken(r *http.Request) string {
	if t := r.Header.Get("X-Token"); t != "" {
		return t
	}
	return r.URL.Query().Get("token")
}

// QueueRoute runs the checks every queue route shares, in lmstfy's order
// (LMSTFY-API.md §2): names (400), the pool of the token's prefix (404),
// the token (401), the throttle (429); then the handler. A throttled
// request that ends with another status than 200/201 gives its unit back.
func (s *Service) QueueRoute(o RouteOpts, h QueueHandler) queueRoute {
	return func(w http.ResponseWriter, r *http.Request, ns, q, id string) {
		if (o.Consume || o.Stream) && r.Method == http.MethodHead {
			// The router answers HEAD on GET routes; a consume is not a
			// read: it would lease jobs (and spend their tries) to answer
			// a request that gets no body. A stream would hold a long-poll
			// place to send nothing.
			w.Header().Set("Allow", http.MethodGet)
			respond.WriteError(w, http.StatusMethodNotAllowed, "method not allowed")
			return
		}
		if o.Consume {
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
		qr := &QueueReq{Pool: p, Ns: ns, Q: q, ID: id}
		if !o.Public {
			if raw == "" {
				respond.WriteError(w, http.StatusUnauthorized, "token not found")
				return
			}
			ref := auth.NewTokenRef(poolName, ns, token)
			if !s.checkToken(w, r, ref) {
				return
			}
			qr.Token = token
			qr.Ref = ref
			if o.Stream || (o.Consume || o.LongPoll) && longPoll(r) {
				release, err := s.PollCaps.Poll(ref)
				if err != nil {
					auth.WritePollRefused(w, err)
					return
				}
				defer release()
				// A long poll ends when its token is deleted (../auth/tokenwatch.go).
				ctx, unwatch := s.watch.Watch(r.Context(), ref)
				defer unwatch()
				r = r.WithContext(ctx)
			}
		}
		if o.Throttle != throttleNone {
			giveBack, ok := s.throttled(w, r, auth.NewTokenRef(poolName, ns, token), o.Throttle)
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
							s.Log.WarnContext(ctx, "rmqd: could not give back a throttle unit", "request_id", respond.RequestID(w), "err", err)
						}
					}
				}()
			}
		}
		h(w, r, qr)
	}
}

// checkToken looks the token up behind the guard (../auth/guard.go); false means
// the answer (401, 429 or 500) was written.
func (s *Service) checkToken(w http.ResponseWriter, r *http.Request, ref auth.TokenRef) bool {
	addr := s.guard.ClientAddr(r)
	if refused, retry := s.guard.Refused(auth.GuardToken, addr); refused && !s.guard.TokenKnown(addr, ref) {
		auth.WriteGuessRefused(w, auth.GuardToken, retry)
		return false
	}
	valid, err := s.Tokens.Valid(r.Context(), ref.Pool, ref.Ns, ref.Token)
	if err != nil {
		s.WriteInternal(w, r, fmt.Errorf("token lookup: %w", err))
		return false
	}
	if !valid {
		refuse, retry, err := s.guard.Failed(r.Context(), auth.GuardToken, addr)
		switch {
		case err != nil:
			s.WriteInternal(w, r, fmt.Errorf("count a failed token: %w", err))
		case refuse:
			auth.WriteGuessRefused(w, auth.GuardToken, retry)
		default:
			respond.WriteError(w, http.StatusUnauthorized, "invalid token")
		}
		return false
	}
	s.guard.TokenOK(addr, ref)
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
func (s *Service) throttled(w http.ResponseWriter, r *http.Request, ref auth.TokenRef, kind throttleKind) (giveBack func(context.Context) error, ok bool) {
	l, found, err := s.Limits.Get(r.Context(), ref.Pool, ref.Ns, ref.Token)
	if err != nil {
		s.WriteInternal(w, r, fmt.Errorf("limit lookup: %w", err))
		return nil, false
	}
	if !found {
		return nil, true
	}
	sd, verb := auth.ReadSide, "consume"
	if kind == ThrottleWrite {
		sd, verb = auth.WriteSide, "produce"
	}
	allowed, giveBack, err := s.throttle.Take(r.Context(), ref, l, sd)
	if err != nil {
		s.WriteInternal(w, r, fmt.Errorf("throttle: %w", err))
		return nil, false
	}
	if !allowed {
		if sd == auth.ReadSide {
			s.Metrics.ThrottledRead.Add(1)
		} else {
			s.Metrics.ThrottledWrite.Add(1)
		}
		respond.WriteJSON(w, http.StatusTooManyRequests, respond.MsgBody{Msg: fmt.Sprintf("token(%s) %s reach the limit rate, please retry later", ref.Token, verb)})
		return nil, false
	}
	return giveBack, true
}

// BasicAuth guards an admin route when accounts are configured (§8.4).
func (s *Service) BasicAuth(h http.HandlerFunc) http.Handler { return s.RequireAccount(h) }

// RequireAccount is basicAuth as middleware (the dashboard's WithAuth).
// Failed logins are counted per client address (../auth/guard.go): beyond the
// allowance the address gets 429 and its credentials are not checked. A
// request without credentials (a browser's first, before it asks the
// user) is not a failure.
func (s *Service) RequireAccount(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(s.Cfg.Accounts) > 0 {
			user, pass, given := r.BasicAuth()
			if !given {
				askForLogin(w)
				return
			}
			addr := s.guard.ClientAddr(r)
			ok := s.accountOK(user, pass)
			known := loginRef(user, pass)
			if refused, retry := s.guard.Refused(auth.GuardLogin, addr); refused && !(ok && s.guard.TokenKnown(addr, known)) {
				auth.WriteGuessRefused(w, auth.GuardLogin, retry)
				return
			}
			if ok {
				s.guard.TokenOK(addr, known)
			}
			if !ok {
				refuse, retry, err := s.guard.Failed(r.Context(), auth.GuardLogin, addr)
				switch {
				case err != nil:
					s.WriteInternal(w, r, fmt.Errorf("count a failed login: %w", err))
				case refuse:
					auth.WriteGuessRefused(w, auth.GuardLogin, retry)
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
func loginRef(user, pass string) auth.TokenRef {
	sum := sha256.Sum256([]byte(user + "\x00" + pass))
	return auth.TokenRef{Pool: "\x00login", Ns: user, Token: string(sum[:])}
}

// askForLogin answers 401 with an empty body, as lmstfy does (§8.4).
func askForLogin(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Basic realm="Authorization Required"`)
	w.WriteHeader(http.StatusUnauthorized)
}

func (s *Service) accountOK(user, pass string) bool {
	want, known := s.Cfg.Accounts[user]
	// Compare digests, and even for an unknown user, so that the time
	// tells neither the password's length nor whether the user exists.
	a, b := sha256.Sum256([]byte(pass)), sha256.Sum256([]byte(want))
	match := subtle.ConstantTimeCompare(a[:], b[:]) == 1
	return known && match
}
