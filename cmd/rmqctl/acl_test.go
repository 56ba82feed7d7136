package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/luascripts"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// aclRule is the least-privilege ACL rule of the library, rmqctl and these
// tests under the default prefix "rmq": the keys and channels under the
// prefix, and only the commands they send. docs/operations.md quotes it
// verbatim (TestACLRuleDocumented).
const aclRule = `resetkeys ~rmq:* resetchannels &rmq:* nocommands +ping +select +info +time +hsetnx +hget +hgetall +hmget +hexists +hset +hdel +get +set +exists +unlink +zadd +zrem +zrange +zrevrange +zrevrank +zcard +zcount +zscore +zmscore +xlen +zlexcount +hlen +hincrby +pexpire +expireat +zremrangebyscore +del +hscan +xadd +xrange +xrevrange +xread +eval +evalsha +script|load +publish +subscribe +unsubscribe +spublish +ssubscribe +sunsubscribe +cluster|slots +command`

const (
	aclUser     = "rmq"
	aclPassword = "least-privilege"
)

// aclCommands returns the commands aclRule allows, lower case.
func aclCommands() []string {
	var out []string
	for _, f := range strings.Fields(aclRule) {
		if c, ok := strings.CutPrefix(f, "+"); ok {
			out = append(out, c)
		}
	}
	return out
}

// Every command a script runs needs the caller's permission (Redis checks
// commands inside scripts against the user's ACL), so every redis.call in
// every .lua file must be allowed; PUBLISH and SPUBLISH come through ARGV.
func TestACLRuleCoversScripts(t *testing.T) {
	call := regexp.MustCompile(`redis\.p?call\(\s*'([A-Za-z]+)'`)
	allowed := aclCommands()
	names := append(luascripts.Names(), "lib")
	seen := 0
	for _, name := range names {
		src, err := luascripts.Source(name)
		require.NoError(t, err)
		for _, m := range call.FindAllStringSubmatch(src, -1) {
			seen++
			assert.Contains(t, allowed, strings.ToLower(m[1]), "%s.lua calls %s", name, m[1])
		}
	}
	require.Greater(t, seen, 30, "no redis.call found: the pattern is wrong")
	for _, c := range []string{"publish", "spublish", "evalsha", "eval", "script|load"} {
		assert.Contains(t, allowed, c)
	}
}

// The rule in the operations guide is the one the tests run with.
func TestACLRuleDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	require.NoError(t, err)
	assert.Contains(t, string(doc), "ACL SETUSER rmq on >PASSWORD "+aclRule+"\n")
}

// logSink collects what the client logs at warning level and above: under
// the ACL user nothing may go wrong quietly (a refused SUBSCRIBE or INFO
// only shows in a log line).
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// A redis-server whose default user is disabled and whose only other user
// has aclRule: a real rmq.Client sends all three types (one by one and in
// a batch), consumes, acks, rolls back to retry and to dead, removes, and
// the Inspector and the rmqctl binary read, requeue and delete, with not
// one command, key or channel refused (ACL LOG stays empty).
func TestLeastPrivilegeACL(t *testing.T) {
	bin := buildBinary(t)
	srv := redistest.Start(t, redisserver.Config{
		ACL: []string{
			"user default off",
			"user " + aclUser + " on >" + aclPassword + " " + aclRule,
			"user admin on >admin ~* &* +@all",
		},
		PingUser: "admin", PingPassword: "admin",
	})
	admin := redistest.Client(t, srv, func(o *redis.Options) { o.Username, o.Password = "admin", "admin" })
	rdb := redistest.Client(t, srv, func(o *redis.Options) { o.Username, o.Password = aclUser, aclPassword })
	u := (&url.URL{Scheme: "redis", User: url.UserPassword(aclUser, aclPassword), Host: srv.Addr()}).String()
	runLeastPrivilege(t, bin, rdb, []*redis.Client{admin}, ctl{t: t, bin: bin, env: []string{"REDIS_URL=" + u}})

	// And it is least privilege: other keys, channels and commands are refused.
	ctx := context.Background()
	for _, err := range []error{
		rdb.Set(ctx, "other:k", "v", 0).Err(),
		rdb.Get(ctx, "other:k").Err(),
		rdb.Publish(ctx, "other", "x").Err(),
		rdb.Keys(ctx, "*").Err(),
		rdb.FlushAll(ctx).Err(),
		rdb.ConfigGet(ctx, "requirepass").Err(),
		rdb.Eval(ctx, "return redis.call('SET', KEYS[1], 'x')", []string{"other:k"}).Err(),
		rdb.Eval(ctx, "return redis.call('FLUSHALL')", []string{"rmq:k"}).Err(),
	} {
		require.Error(t, err)
		assert.Regexp(t, `NOPERM|user executing the script can't run this command`, err.Error())
	}
	c, err := rmq.New(rdb, rmq.WithPrefix("other"))
	require.NoError(t, err)
	_, err = c.Producer().SendPriority(ctx, topic.MustNew("x", topic.Priority, 1), []byte("x"), 100)
	assert.ErrorContains(t, err, "NOPERM", "a prefix outside the rule")
}

// The same rule on a Redis Cluster: CLUSTER SLOTS, sharded pub/sub and
// scripts on every master.
func TestLeastPrivilegeACLCluster(t *testing.T) {
	bin := buildBinary(t)
	user := append([]string{"--user", aclUser, "on", ">" + aclPassword}, strings.Fields(aclRule)...)
	cl := redistest.StartCluster(t, redisserver.ClusterConfig{ExtraArgs: user})
	cc := redistest.ClusterClient(t, cl, func(o *redis.ClusterOptions) { o.Username, o.Password = aclUser, aclPassword })
	var admins []*redis.Client
	for _, n := range cl.Nodes() {
		admins = append(admins, redistest.Client(t, n))
	}
	u := (&url.URL{Scheme: "redis", User: url.UserPassword(aclUser, aclPassword), Host: cl.Addrs()[0]}).String()
	runLeastPrivilege(t, bin, cc, admins, ctl{t: t, bin: bin, global: []string{"--cluster", u}})
}

func runLeastPrivilege(t *testing.T, bin string, rdb redis.UniversalClient, admins []*redis.Client, r ctl) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, a := range admins {
		require.NoError(t, a.Do(ctx, "ACL", "LOG", "RESET").Err())
	}
	var logs logSink
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := rmq.New(rdb, rmq.WithLogger(log))
	require.NoError(t, err)

	orders := topic.MustNew("orders", topic.FixedTime, 4)
	prices := topic.MustNew("prices", topic.RangeMerge, 2)
	jobs := topic.MustNew("jobs", topic.Priority, 2)
	var (
		mu     sync.Mutex
		acked  = map[string]int{} // topic/id -> attempts when acked
		failed = map[string]bool{}
	)
	done := make(chan struct{}, 64)
	handler := func(_ context.Context, m *consumer.Message) error {
		mu.Lock()
		defer mu.Unlock()
		// "retry-*" fails its first attempt; "dead-*" every attempt.
		if strings.HasPrefix(m.ID, "dead-") || (strings.HasPrefix(m.ID, "retry-") && !failed[m.ID]) {
			failed[m.ID] = true
			done <- struct{}{}
			return fmt.Errorf("refused %s", m.ID)
		}
		acked[m.Topic+"/"+m.ID] = m.Attempt
		done <- struct{}{}
		return nil
	}
	zeroBackoff := consumer.WithRetryBackoff(func(int) time.Duration { return 0 })
	for _, tp := range []topic.Topic{orders, prices, jobs} {
		require.NoError(t, c.Register(tp, consumer.ListenerFunc(handler), consumer.WithMaxRetries(1), zeroBackoff))
	}
	require.NoError(t, c.Start(ctx))
	defer func() { require.NoError(t, c.Close(ctx)) }()
	p := c.Producer()

	// A fixed-time message due shortly arrives by wake-up, not by polling.
	_, err = p.SendFixedTime(ctx, orders, []byte("o1"), time.Now().Add(200*time.Millisecond), producer.WithKey("o1"))
	require.NoError(t, err)
	_, err = p.SendFixedTime(ctx, orders, []byte("r1"), time.Now(), producer.WithKey("retry-o"))
	require.NoError(t, err)
	_, err = p.SendFixedTime(ctx, orders, []byte("d1"), time.Now(), producer.WithKey("dead-o"))
	require.NoError(t, err)
	_, err = p.SendRangeMerge(ctx, prices, []byte("p1"), 50*time.Millisecond, producer.WithKey("p1"))
	require.NoError(t, err)
	_, err = p.SendPriority(ctx, jobs, []byte("j1"), 100, producer.WithKey("j1"))
	require.NoError(t, err)
	_, err = p.SendBatch(ctx, jobs, []producer.BatchMessage{{Body: []byte("j2"), Key: "j2", Priority: 200}, {Body: []byte("j3"), Key: "dead-j", Priority: 300}})
	require.NoError(t, err)
	// Waiting messages for the Inspector, and one to remove by id.
	_, err = p.SendFixedTime(ctx, orders, []byte("later"), time.Now().Add(time.Hour), producer.WithKey("later"))
	require.NoError(t, err)
	unkeyed, err := p.SendFixedTime(ctx, orders, []byte("remove me"), time.Now().Add(time.Hour))
	require.NoError(t, err)
	_, err = p.Remove(ctx, orders, unkeyed) // no key: searched in every slot
	require.NoError(t, err)

	// o1, p1, j1, j2 acked; retry-o fails then acks; dead-o and dead-j
	// fail twice: 4 + 2 + 4 handler calls.
	for range 10 {
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatalf("deliveries missing: acked %v", acked)
		}
	}
	mu.Lock()
	assert.Equal(t, map[string]int{"orders/o1": 1, "orders/retry-o": 2, "prices/p1": 1, "jobs/j1": 1, "jobs/j2": 1}, acked)
	mu.Unlock()

	insp := c.Inspector()
	require.Eventually(t, func() bool {
		st, err := insp.Stats(ctx, orders)
		return err == nil && st.Dead == 1 && st.Prepare == 0
	}, 10*time.Second, 20*time.Millisecond)
	ts, err := insp.Topics(ctx)
	require.NoError(t, err)
	assert.Len(t, ts, 3)
	st, err := insp.Stats(ctx, orders)
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.Store, "only 'later' waits")
	dead, err := insp.Dead(ctx, orders, rmq.WithLimit(1))
	require.NoError(t, err)
	require.Len(t, dead, 1)
	_, err = insp.Dead(ctx, orders, rmq.WithCursor(dead[0].Cursor()))
	require.NoError(t, err)
	m, err := insp.DeadMessage(ctx, jobs, "dead-j")
	require.NoError(t, err)
	assert.Equal(t, "refused dead-j", m.LastError)
	waiting, err := insp.Peek(ctx, orders, 10)
	require.NoError(t, err)
	require.Len(t, waiting, 1)
	assert.Equal(t, "later", waiting[0].ID)

	// rmqctl, as the same user.
	assert.Regexp(t, `(?m)^orders\s+fixedtime\s+4\s+1\s+0\s+1$`, r.ok("topics"))
	assert.Regexp(t, `(?m)^dead:\s+1$`, r.ok("stats", "jobs", "--slots"))
	assert.Contains(t, r.ok("dead", "list", "orders"), "refused dead-o")
	assert.Contains(t, r.ok("dead", "show", "jobs", "dead-j"), "refused dead-j")
	assert.Contains(t, r.ok("peek", "orders"), "later")
	assert.Equal(t, "requeued 1 dead message of orders\n", r.ok("dead", "requeue", "orders", "dead-o"))
	assert.Equal(t, "removed later from orders\n", r.ok("remove", "orders", "later"))
	assert.Equal(t, "deleted 1 dead message of jobs\n", r.ok("dead", "delete", "jobs", "--all", "--yes"))
	// The history and the worker records: the client's record is listed
	// (Start wrote it), its counts are read (and the index pruned).
	assert.Contains(t, r.ok("workers"), "orders")
	assert.Contains(t, r.ok("history", "orders", "--since", "5m"), "COMPLETED")
	// The requeued message fails twice more and is dead again; requeue it
	// all through the Inspector and delete it by id.
	for range 2 {
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatal("requeued message not delivered")
		}
	}
	require.Eventually(t, func() bool {
		st, err := insp.Stats(ctx, orders)
		return err == nil && st.Dead == 1 && st.Prepare == 0
	}, 10*time.Second, 20*time.Millisecond)
	n, err := insp.DeleteDead(ctx, orders, "dead-o")
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	_, err = insp.RequeueAll(ctx, jobs)
	require.NoError(t, err)
	_, err = insp.PurgeDead(ctx, jobs)
	require.NoError(t, err)
	require.NoError(t, c.Close(ctx))
	ws, err := insp.Workers(ctx)
	require.NoError(t, err)
	assert.Empty(t, ws, "Close deleted the worker record")
	ps, err := insp.History(ctx, orders, time.Now().Add(-5*time.Minute))
	require.NoError(t, err)
	var sent int64
	for _, p := range ps {
		sent += p.Sent
	}
	assert.Positive(t, sent, "Close wrote the history")

	for _, a := range admins {
		entries, err := a.Do(ctx, "ACL", "LOG").Slice()
		require.NoError(t, err)
		assert.Empty(t, entries, "refused under %s: %v", aclRule, entries)
	}
	// Dead-lettering is logged at Warn by design; nothing else may be.
	var other []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if line != "" && !strings.Contains(line, "moved to the dead queue") {
			other = append(other, line)
		}
	}
	assert.Empty(t, other)
}
