package auth

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
)

// Limit is a per-token throttle: at most Read consumes and Write publishes
// per Interval seconds; a side ≤ 0 is unlimited.
type Limit struct {
	Read     int64 `json:"read"`
	Write    int64 `json:"write"`
	Interval int64 `json:"interval"`
}

// LimitStore keeps the limits of every pool in the default pool's Redis,
// one hash per pool with field "<namespace>/<token>" (namespaces never
// contain '/'). Lookups are cached for cacheTTL, hits and misses alike,
// because every publish and consume asks; a change takes effect at once on
// the process that made it and within cacheTTL on the others.
type LimitStore struct {
	rdb      redis.UniversalClient
	prefix   string
	cacheTTL time.Duration

	mu    sync.Mutex
	cache map[TokenRef]cachedLimit
	gen   uint64 // changes so far: a lookup overlapping one is not cached
}

type cachedLimit struct {
	l     Limit
	found bool
	until time.Time
}

func NewLimitStore(rdb redis.UniversalClient, prefix string, cacheTTL time.Duration) *LimitStore {
	return &LimitStore{rdb: rdb, prefix: prefix, cacheTTL: cacheTTL, cache: map[TokenRef]cachedLimit{}}
}

func (s *LimitStore) key(pool string) string { return s.prefix + ":rmqd:limits:" + pool }

func limitField(ns, token string) string { return ns + "/" + token }

// forget drops ref's entry after a change was written, so that no lookup
// that read the old limit before the change can cache it afterwards.
func (s *LimitStore) forget(ref TokenRef) {
	s.mu.Lock()
	s.gen++
	delete(s.cache, ref)
	s.mu.Unlock()
}

func (s *LimitStore) Get(ctx context.Context, pool, ns, token string) (Limit, bool, error) {
	ref := TokenRef{pool, ns, token}
	now := time.Now()
	s.mu.Lock()
	c, hit := s.cache[ref]
	gen := s.gen
	s.mu.Unlock()
	if hit && now.Before(c.until) {
		return c.l, c.found, nil
	}
	v, err := s.rdb.HGet(ctx, s.key(pool), limitField(ns, token)).Result()
	var l Limit
	found := err == nil
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		return Limit{}, false, err
	default:
		if err := json.Unmarshal([]byte(v), &l); err != nil {
			return Limit{}, false, err
		}
	}
	if s.cacheTTL > 0 {
		s.mu.Lock()
		if s.gen == gen {
			s.cache[ref] = cachedLimit{l, found, now.Add(s.cacheTTL)}
		}
		s.mu.Unlock()
	}
	return l, found, nil
}

// Set stores l; with onlyNew it refuses (false) to replace an existing one.
func (s *LimitStore) Set(ctx context.Context, pool, ns, token string, l Limit, onlyNew bool) (bool, error) {
	defer s.forget(TokenRef{pool, ns, token})
	v, _ := json.Marshal(l)
	if onlyNew {
		return s.rdb.HSetNX(ctx, s.key(pool), limitField(ns, token), v).Result()
	}
	return true, s.rdb.HSet(ctx, s.key(pool), limitField(ns, token), v).Err()
}

func (s *LimitStore) Remove(ctx context.Context, pool, ns, token string) error {
	defer s.forget(TokenRef{pool, ns, token})
	return s.rdb.HDel(ctx, s.key(pool), limitField(ns, token)).Err()
}

type limitEntry struct {
	Namespace string `json:"namespace"`
	Token     string `json:"token"`
	Limiter   Limit  `json:"limiter"`
}

// All lists the limits of the given pools, sorted by namespace and token.
// Tokens of pools other than default carry their "pool:" prefix.
func (s *LimitStore) All(ctx context.Context, pools []string) ([]limitEntry, error) {
	out := []limitEntry{}
	for _, pool := range pools {
		m, err := s.rdb.HGetAll(ctx, s.key(pool)).Result()
		if err != nil {
			return nil, err
		}
		for field, v := range m {
			ns, token, _ := strings.Cut(field, "/")
			var l Limit
			if err := json.Unmarshal([]byte(v), &l); err != nil {
				return nil, err
			}
			if pool != names.DefaultPool {
				token = pool + ":" + token
			}
			out = append(out, limitEntry{ns, token, l})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Token < out[j].Token
	})
	return out, nil
}

// side is what a throttled request does: consume (read) or publish (write).
type side int

const (
	ReadSide side = iota
	WriteSide
)

//go:embed refund.lua
var refundSource string

var refundScript = redis.NewScript(refundSource)

// Throttler enforces limits across every rmqd process through Redis
// (redis_rate's GCRA with a burst of the whole allowance: the first Read
// requests of an idle token pass at once, the next one is refused, and the
// allowance then refills evenly over Interval; lmstfy counts in fixed
// windows, which refuses the same request but refills all at once).
type Throttler struct {
	rdb    redis.UniversalClient
	prefix string
	lim    *redis_rate.Limiter
}

func NewThrottler(rdb redis.UniversalClient, prefix string) *Throttler {
	return &Throttler{rdb: rdb, prefix: prefix, lim: redis_rate.NewLimiter(rdb)}
}

func (t *Throttler) RateKey(ref TokenRef, sd side) string {
	s := "read"
	if sd == WriteSide {
		s = "write"
	}
	return t.prefix + ":rmqd:rate:" + ref.Pool + ":" + ref.Ns + ":" + s + ":" + ref.Token
}

// Take takes one unit of l's sd side for ref. It returns allowed false when
// the allowance is used up, and, when a unit was taken, a function that
// gives it back (for requests that end without success).
func (t *Throttler) Take(ctx context.Context, ref TokenRef, l Limit, sd side) (allowed bool, giveBack func(context.Context) error, err error) {
	n := l.Read
	if sd == WriteSide {
		n = l.Write
	}
	if n <= 0 || l.Interval <= 0 {
		return true, nil, nil
	}
	period := time.Duration(l.Interval) * time.Second
	rl := redis_rate.Limit{Rate: int(n), Burst: int(n), Period: period}
	key := t.RateKey(ref, sd)
	res, err := t.lim.Allow(ctx, key, rl)
	if err != nil {
		return false, nil, err
	}
	if res.Allowed == 0 {
		return false, nil, nil
	}
	emission := period.Seconds() / float64(n)
	return true, func(ctx context.Context) error {
		return refundScript.Run(ctx, t.rdb, []string{"rate:" + key}, emission, 1).Err()
	}, nil
}
