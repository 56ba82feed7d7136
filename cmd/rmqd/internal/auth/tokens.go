package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// TokenStore keeps the tokens of every (pool, namespace) in the default
// pool's Redis, one hash per pair: field = SHA-256 of the token, value =
// the token and its description. Looking a token up by its digest and then
// comparing it in constant time means neither Redis's lookup nor Go's
// comparison takes longer for a guess that shares a longer prefix with a
// real token.
//
// Valid tokens are cached for cacheTTL, so a busy client costs Redis one
// lookup per token and cacheTTL. A deletion takes effect at once on the
// process that handled it and within cacheTTL on the others (lmstfy's
// caches behave alike): an entry lives cacheTTL from the instant before
// the lookup that read it, and a lookup that overlapped a deletion here is
// not cached. Unknown tokens are never cached: a token created through
// another process works at once.
type TokenStore struct {
	rdb      redis.UniversalClient
	prefix   string
	cacheTTL time.Duration

	// Removed, if set, is told of each deletion made through this
	// process, after it reached Redis (to end the token's long polls).
	Removed func(TokenRef)

	mu    sync.Mutex
	cache map[TokenRef]time.Time // valid until
	gen   uint64                 // deletions so far
}

type TokenRef struct{ Pool, Ns, Token string }

type TokenRecord struct {
	Token       string `json:"t"`
	Description string `json:"d"`
}

func NewTokenStore(rdb redis.UniversalClient, prefix string, cacheTTL time.Duration) *TokenStore {
	return &TokenStore{rdb: rdb, prefix: prefix, cacheTTL: cacheTTL, cache: map[TokenRef]time.Time{}}
}

// namespacesKey is a set of "pool/namespace" that ever had a token made,
// for the dashboard's token page.
func (s *TokenStore) namespacesKey() string { return s.prefix + ":rmqd:namespaces" }

// Namespaces lists "pool/namespace" entries, sorted.
func (s *TokenStore) Namespaces(ctx context.Context) ([]string, error) {
	ns, err := s.rdb.SMembers(ctx, s.namespacesKey()).Result()
	sort.Strings(ns)
	return ns, err
}

func (s *TokenStore) key(pool, ns string) string {
	return s.prefix + ":rmqd:tokens:" + pool + ":" + ns
}

func Digest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Create stores a token; created is false when it already exists.
func (s *TokenStore) Create(ctx context.Context, pool, ns, token, description string) (created bool, err error) {
	rec, _ := json.Marshal(TokenRecord{token, description})
	created, err = s.rdb.HSetNX(ctx, s.key(pool, ns), Digest(token), rec).Result()
	if err != nil {
		return false, err
	}
	return created, s.rdb.SAdd(ctx, s.namespacesKey(), pool+"/"+ns).Err()
}

// List returns token → description.
func (s *TokenStore) List(ctx context.Context, pool, ns string) (map[string]string, error) {
	vals, err := s.rdb.HVals(ctx, s.key(pool, ns)).Result()
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(vals))
	for _, v := range vals {
		var rec TokenRecord
		if err := json.Unmarshal([]byte(v), &rec); err != nil {
			return nil, err
		}
		out[rec.Token] = rec.Description
	}
	return out, nil
}

func (s *TokenStore) Remove(ctx context.Context, pool, ns, token string) error {
	err := s.rdb.HDel(ctx, s.key(pool, ns), Digest(token)).Err()
	// After the delete, so that no lookup that read the token before it
	// can cache it afterwards (valid checks gen); even when the delete
	// failed, as it may have reached Redis.
	s.forget(TokenRef{pool, ns, token})
	if s.Removed != nil {
		s.Removed(TokenRef{pool, ns, token})
	}
	return err
}

// forget drops ref from the cache: it was deleted (here, or through
// another process as the token watch found).
func (s *TokenStore) forget(ref TokenRef) {
	s.mu.Lock()
	s.gen++
	delete(s.cache, ref)
	s.mu.Unlock()
}

// Valid reports whether token belongs to (pool, ns).
func (s *TokenStore) Valid(ctx context.Context, pool, ns, token string) (bool, error) {
	ref := TokenRef{pool, ns, token}
	now := time.Now()
	s.mu.Lock()
	until, hit := s.cache[ref]
	if hit && now.After(until) {
		delete(s.cache, ref)
		hit = false
	}
	gen := s.gen
	s.mu.Unlock()
	if hit {
		return true, nil
	}
	v, err := s.rdb.HGet(ctx, s.key(pool, ns), Digest(token)).Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var rec TokenRecord
	if err := json.Unmarshal([]byte(v), &rec); err != nil {
		return false, err
	}
	if subtle.ConstantTimeCompare([]byte(rec.Token), []byte(token)) != 1 {
		return false, nil
	}
	if s.cacheTTL > 0 {
		s.mu.Lock()
		if s.gen == gen {
			s.cache[ref] = now.Add(s.cacheTTL)
		}
		s.mu.Unlock()
	}
	return true, nil
}

// NewTokenRef names token of namespace ns in pool.
func NewTokenRef(pool, ns, token string) TokenRef { return TokenRef{pool, ns, token} }
