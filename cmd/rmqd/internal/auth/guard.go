package auth

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"
)

// Guard throttles guessing: failed basic-auth logins (admin listener)
// and API requests with an invalid token are counted per client address
// in Redis, so every rmqd on the same Redis shares the count. Beyond
// --max-auth-failures per minute (a burst of that many, then one every
// minute/N: redis_rate's GCRA) the address is refused with 429 until its
// allowance refills, and while it is refused its credentials are not even
// looked at: a right guess is refused like a wrong one.
//
// Valid requests pay no Redis call for this: only a failure is counted,
// and a process learns that an address is refused from its own counting
// (kept in memory until the allowance refills). A valid request checks
// that memory only.
//
// An address refused for invalid tokens still gets through with a token
// that succeeded from that address in the last knownTTL: a fleet of
// clients behind one NAT keeps working while one of them retries a
// deleted token. Tokens are 128 random bits, so this answers no guess.
// Admin logins have the same exemption for the credentials that succeeded
// from the address (../service/auth.go, loginRef); any other login from a refused
// address, right or wrong, waits until it refills, so a right guess is
// refused like a wrong one.
//
// The client address is the connection's peer, or, when that peer is one
// of --trusted-proxy, the rightmost X-Forwarded-For entry that is not a
// trusted proxy. IPv6 addresses are counted by /64, what one host
// usually holds.
type Guard struct {
	log     *slog.Logger
	lim     *redis_rate.Limiter
	prefix  string
	rate    redis_rate.Limit
	proxies []netip.Prefix
	off     bool

	mu      sync.Mutex
	blocked map[guardKey]time.Time // refused until
	// nblocked is len(blocked), set under mu: while nothing is refused,
	// a request's check takes no lock.
	nblocked  atomic.Int64
	known     map[knownToken]time.Time
	nextSweep int // len(known) at which expired entries are dropped
}

type guardKind uint8

const (
	GuardLogin guardKind = iota // admin basic auth
	GuardToken                  // API tokens
)

func (k guardKind) String() string {
	if k == GuardLogin {
		return "login"
	}
	return "token"
}

type guardKey struct {
	kind guardKind
	addr netip.Addr
}

type knownToken struct {
	addr netip.Addr
	ref  TokenRef
}

// knownTTL is how long a token that succeeded from an address stays
// exempt for it; a success refreshes it once knownRefresh has passed (so
// a busy client writes the map once a minute, not per request).
const (
	knownTTL     = 10 * time.Minute
	knownRefresh = time.Minute
	minSweep     = 1024
)

// NewGuard allows perMinute failures per address and kind; 0 turns
// the guard off.
func NewGuard(rdb redis.UniversalClient, prefix string, perMinute int, proxies []netip.Prefix, log *slog.Logger) *Guard {
	return &Guard{
		log: log, lim: redis_rate.NewLimiter(rdb), prefix: prefix, proxies: proxies,
		rate: redis_rate.Limit{Rate: perMinute, Burst: perMinute, Period: time.Minute},
		off:  perMinute <= 0, blocked: map[guardKey]time.Time{}, known: map[knownToken]time.Time{},
		nextSweep: minSweep,
	}
}

// ClientAddr is the address r's failures count against.
func (g *Guard) ClientAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{} // not TCP: all such clients share one count
	}
	a := ap.Addr().Unmap()
	if g.trusted(a) {
		hops := r.Header.Values("X-Forwarded-For")
	walk:
		for i := len(hops) - 1; i >= 0; i-- {
			parts := strings.Split(hops[i], ",")
			for j := len(parts) - 1; j >= 0; j-- {
				c, err := netip.ParseAddr(strings.TrimSpace(parts[j]))
				if err != nil {
					break walk // junk: count against the last hop known
				}
				a = c.Unmap()
				if !g.trusted(a) {
					break walk
				}
			}
		}
	}
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

func (g *Guard) trusted(a netip.Addr) bool {
	for _, p := range g.proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Refused reports whether addr is refused for kind now, and for how much
// longer. Memory only: no Redis call.
func (g *Guard) Refused(kind guardKind, addr netip.Addr) (bool, time.Duration) {
	if g.off || g.nblocked.Load() == 0 {
		return false, 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	until, ok := g.blocked[guardKey{kind, addr}]
	if !ok {
		return false, 0
	}
	left := time.Until(until)
	if left <= 0 {
		delete(g.blocked, guardKey{kind, addr})
		g.nblocked.Store(int64(len(g.blocked)))
		return false, 0
	}
	return true, left
}

// TokenKnown reports whether ref succeeded from addr within knownTTL.
func (g *Guard) TokenKnown(addr netip.Addr, ref TokenRef) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	last, ok := g.known[knownToken{addr, ref}]
	return ok && time.Since(last) < knownTTL
}

// TokenOK records that ref succeeded from addr.
func (g *Guard) TokenOK(addr netip.Addr, ref TokenRef) {
	if g.off {
		return
	}
	k := knownToken{addr, ref}
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if last, ok := g.known[k]; ok && now.Sub(last) < knownRefresh {
		return
	}
	g.known[k] = now
	if len(g.known) >= g.nextSweep {
		for k, last := range g.known {
			if now.Sub(last) >= knownTTL {
				delete(g.known, k)
			}
		}
		g.nextSweep = max(minSweep, 2*len(g.known))
	}
}

// ForgetToken drops ref's exemptions (the token was deleted).
func (g *Guard) ForgetToken(ref TokenRef) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k := range g.known {
		if k.ref == ref {
			delete(g.known, k)
		}
	}
}

// Failed counts a failure of kind from addr in Redis; refuse is true when
// it was beyond the allowance (the address is then refused for retry).
func (g *Guard) Failed(ctx context.Context, kind guardKind, addr netip.Addr) (refuse bool, retry time.Duration, err error) {
	if g.off {
		return false, 0, nil
	}
	key := g.prefix + ":rmqd:guard:" + kind.String() + ":" + addr.String()
	res, err := g.lim.Allow(ctx, key, g.rate)
	if err != nil {
		return false, 0, err
	}
	if res.Allowed > 0 {
		return false, 0, nil
	}
	retry = max(res.RetryAfter, time.Second)
	now := time.Now()
	g.mu.Lock()
	k := guardKey{kind, addr}
	prev, already := g.blocked[k]
	already = already && now.Before(prev)
	g.blocked[k] = now.Add(retry)
	if len(g.blocked) > minSweep {
		for k, until := range g.blocked {
			if now.After(until) {
				delete(g.blocked, k)
			}
		}
	}
	g.nblocked.Store(int64(len(g.blocked)))
	g.mu.Unlock()
	if !already {
		g.log.WarnContext(ctx, "rmqd: too many failed attempts; refusing the address for a while",
			"kind", kind.String(), "client", addr.String(), "retry_after", retry.Round(time.Second).String())
	}
	return true, retry, nil
}

// WriteGuessRefused answers 429 in the contract's shape ({"msg": ...},
// as a throttled token's answer) with a Retry-After in whole seconds.
func WriteGuessRefused(w http.ResponseWriter, kind guardKind, retry time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retry.Seconds()))))
	what := "invalid tokens"
	if kind == GuardLogin {
		what = "failed logins"
	}
	respond.WriteJSON(w, http.StatusTooManyRequests, respond.MsgBody{Msg: "too many " + what + " from this address, please retry later"})
}
