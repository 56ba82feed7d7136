package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/auth"
)

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// longestShared is the longest prefix any string of a shares with any of
// sorted (sorted ascending): the nearest neighbours in order hold it.
func longestShared(a, sorted []string) (n int, x, y string) {
	for _, s := range a {
		i := sort.SearchStrings(sorted, s)
		for _, j := range []int{i - 1, i, i + 1} {
			if j >= 0 && j < len(sorted) && sorted[j] != s {
				if c := commonPrefix(s, sorted[j]); c > n {
					n, x, y = c, s, sorted[j]
				}
			}
		}
	}
	return n, x, y
}

// bitEntropy estimates the Shannon entropy of 128-bit values, bit by bit:
// the sum over the 128 positions of H(share of ones). A timestamp or a
// counter shows as bits that barely change.
func bitEntropy(vals [][16]byte) float64 {
	var ones [128]int
	for _, v := range vals {
		for i := range 128 {
			if v[i/8]&(0x80>>(i%8)) != 0 {
				ones[i]++
			}
		}
	}
	h := 0.0
	for _, c := range ones {
		p := float64(c) / float64(len(vals))
		if p > 0 && p < 1 {
			h -= p*math.Log2(p) + (1-p)*math.Log2(1-p)
		}
	}
	return h
}

// Finding 3: tokens were ULIDs from the generator that also made every
// answer's X-Request-Id, so a request id disclosed most of a token made
// in the same millisecond. 10,000 tokens, made while 10,000 public
// requests were answered: no token shares more than a timestamp's 10
// characters with any request id (nor with another token), and the
// tokens' bits measure as 128 bits of entropy. A token stored the old way
// still works.
func TestBinaryTokensShareNothingWithRequestIDs(t *testing.T) {
	srv := redistest.Shared(t)
	rdb := redistest.Client(t, srv)
	prefix := redistest.Prefix(t)
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + prefix}, "--access-log=false")

	const n, workers = 10000, 8
	tokens := make([]string, n)
	ids := make([]string, 2*n)
	c := clientFrom("127.0.0.1") // keeps a connection per worker
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				a := doOn(t, c, "POST", fmt.Sprintf("%s/token/ns%d?description=x", p.admin, i%50), "")
				require.Equal(t, http.StatusCreated, a.status, "%s", a)
				var m map[string]string
				a.json(t, &m)
				tokens[i], ids[2*i] = m["token"], a.header.Get("X-Request-Id")
				ids[2*i+1] = doOn(t, c, "GET", p.api+"/api/ns/q/size", "").header.Get("X-Request-Id")
			}
		}()
	}
	wg.Wait()

	vals := make([][16]byte, n)
	seen := map[string]bool{}
	for i, tok := range tokens {
		require.Len(t, tok, 26)
		u, err := ulid.ParseStrict(tok)
		require.NoError(t, err, "a token keeps lmstfy's shape (a ULID's text): %q", tok)
		vals[i] = u
		require.False(t, seen[tok], "token %s made twice", tok)
		seen[tok] = true
	}
	for _, id := range ids {
		require.Len(t, id, 26)
		_, err := ulid.ParseStrict(id)
		require.NoError(t, err, id)
	}
	sortedIDs := append([]string(nil), ids...)
	sort.Strings(sortedIDs)
	shared, tok, id := longestShared(tokens, sortedIDs)
	t.Logf("longest prefix a token shares with a request id: %d characters (%s, %s)", shared, tok, id)
	require.LessOrEqual(t, shared, 10, "token %s and request id %s share more than a timestamp", tok, id)
	sortedTokens := append([]string(nil), tokens...)
	sort.Strings(sortedTokens)
	shared, tok, id = longestShared(tokens, sortedTokens)
	t.Logf("longest prefix two tokens share: %d characters (%s, %s)", shared, tok, id)
	require.LessOrEqual(t, shared, 10, "tokens %s and %s", tok, id)
	// Pairs of consecutive tokens differ in about half their bits.
	diff := 0
	for i := 1; i < n; i++ {
		for j := range 16 {
			diff += bits.OnesCount8(vals[i][j] ^ vals[i-1][j])
		}
	}
	h := bitEntropy(vals)
	t.Logf("entropy of %d tokens, bit by bit: %.2f of 128 bits; consecutive tokens differ in %.1f bits on average", n, h, float64(diff)/(n-1))
	require.Greater(t, h, 127.5)
	require.InDelta(t, 64, float64(diff)/(n-1), 2)

	// A token stored before this change (a ULID, as ulid.Make made them,
	// stored as the token store always has) still works.
	old := "01M8D03PQ3T5WHY8W2RPPEDJNX"
	rec, _ := json.Marshal(auth.TokenRecord{Token: old, Description: "made by an older rmqd"})
	require.NoError(t, rdb.HSet(t.Context(), prefix+":rmqd:tokens:default:legacy", auth.Digest(old), rec).Err())
	a := do(t, "PUT", p.api+"/api/legacy/q", "x", "X-Token: "+old)
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	a = do(t, "GET", p.admin+"/token/legacy", "")
	require.JSONEq(t, `{"tokens":{"`+old+`":"made by an older rmqd"}}`, string(a.body))
}

// Finding 5: wrong passwords and tokens were answered 401 as fast as they
// came, and the right one was accepted right after. 1,000 wrong
// passwords, then 1,000 invalid tokens, from one client address: beyond
// the allowance 429, also for the right password from that address and on
// a second rmqd (the count is in Redis); other addresses are served, a
// token already in use from the guessing address keeps working, and valid
// requests leave no count in Redis.
func TestBinaryThrottlesGuessing(t *testing.T) {
	srv := redistest.Shared(t)
	rdb := redistest.Client(t, srv)
	prefix := redistest.Prefix(t)
	url := "redis://" + srv.Addr() + "/0"
	env := []string{"RMQD_PREFIX=" + prefix, "RMQD_ACCESS_LOG=false"}
	a := startRmqd(t, url, env, "--admin-account", "admin:"+adminPw)
	b := startRmqd(t, url, env, "--admin-account", "admin:"+adminPw)
	tok := newTokenOn(t, a.admin, "ns", adminHdr)
	guesser := clientFrom("127.0.0.2")
	require.Equal(t, http.StatusCreated, doOn(t, guesser, "PUT", a.api+"/api/ns/q", "x", "X-Token: "+tok).status)

	// guess sends 1,000 requests from the guesser, 8 at a time, and
	// returns the count of each status; every 429 is the contract's JSON.
	guess := func(method, url, want string, header func(i int) string) map[int]int {
		counts := map[int]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < 1000; i += 8 {
					r := doOn(t, guesser, method, url, "x", header(i))
					if r.status == http.StatusTooManyRequests {
						require.JSONEq(t, `{"msg":"too many `+want+` from this address, please retry later"}`, string(r.body))
						secs, err := strconv.Atoi(r.header.Get("Retry-After"))
						require.NoError(t, err)
						require.Positive(t, secs)
					}
					mu.Lock()
					counts[r.status]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return counts
	}
	counts := guess("GET", a.admin+"/token/ns", "failed logins", func(i int) string {
		return "Authorization: Basic " + basic("admin", fmt.Sprintf("guess-%d", i))
	})
	t.Logf("1,000 wrong passwords: %v", counts)
	require.Equal(t, 1000, counts[http.StatusUnauthorized]+counts[http.StatusTooManyRequests], "%v", counts)
	require.GreaterOrEqual(t, counts[http.StatusTooManyRequests], 960, "%v", counts)
	// The right password from there is refused like a wrong one...
	require.Equal(t, http.StatusTooManyRequests, doOn(t, guesser, "GET", a.admin+"/token/ns", "", adminHdr).status)
	// ...and on the other rmqd too, once it counted one more failure.
	require.Equal(t, http.StatusTooManyRequests, doOn(t, guesser, "GET", b.admin+"/token/ns", "", "Authorization: Basic "+basic("admin", "one-more")).status)
	require.Equal(t, http.StatusTooManyRequests, doOn(t, guesser, "GET", b.admin+"/dashboard/", "", adminHdr).status)
	// Other addresses are served at once.
	require.Equal(t, http.StatusOK, do(t, "GET", a.admin+"/token/ns", "", adminHdr).status)
	require.Equal(t, http.StatusOK, doOn(t, clientFrom("127.0.0.3"), "GET", b.admin+"/token/ns", "", adminHdr).status)

	counts = guess("PUT", a.api+"/api/ns/q", "invalid tokens", func(i int) string {
		return fmt.Sprintf("X-Token: 01M8D03PQ3T5WHY8W2RP%06d", i)
	})
	t.Logf("1,000 invalid tokens: %v", counts)
	require.Equal(t, 1000, counts[http.StatusUnauthorized]+counts[http.StatusTooManyRequests], "%v", counts)
	require.GreaterOrEqual(t, counts[http.StatusTooManyRequests], 960, "%v", counts)
	// The token in use from that address goes on working (another client
	// behind the same NAT); one never used from there is refused for now.
	require.Equal(t, http.StatusCreated, doOn(t, guesser, "PUT", a.api+"/api/ns/q", "x", "X-Token: "+tok).status)
	tok2 := newTokenOn(t, a.admin, "ns", adminHdr)
	require.Equal(t, http.StatusTooManyRequests, doOn(t, guesser, "PUT", a.api+"/api/ns/q", "x", "X-Token: "+tok2).status)
	require.Equal(t, http.StatusCreated, do(t, "PUT", a.api+"/api/ns/q", "x", "X-Token: "+tok2).status)
	// Public routes are not guarded.
	require.Equal(t, http.StatusOK, doOn(t, guesser, "GET", a.api+"/api/ns/q/size", "").status)

	// Valid requests are not counted: nothing in Redis for their address.
	valid := clientFrom("127.0.0.4")
	for range 100 {
		require.Equal(t, http.StatusCreated, doOn(t, valid, "PUT", b.api+"/api/ns/q", "x", "X-Token: "+tok).status)
		require.Equal(t, http.StatusOK, doOn(t, valid, "GET", b.admin+"/token/ns", "", adminHdr).status)
	}
	keys := redistest.KeysWithPrefix(t, rdb, "rate:"+prefix+":rmqd:guard:")
	require.NotEmpty(t, keys)
	for _, k := range keys {
		require.NotContains(t, k, "127.0.0.4")
		require.True(t, strings.HasSuffix(k, ":127.0.0.2"), k)
	}
}

func basic(user, pass string) string {
	r, _ := http.NewRequest("GET", "/", nil)
	r.SetBasicAuth(user, pass)
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Basic ")
}
