package rmq_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/zkserver"
	"github.com/rmq-go/rmq/internal/testkit/zkserver/zktest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// In-process tests of ZooKeeper mode; the fleet tests with worker processes
// (kill -9, SIGSTOP, ZooKeeper restarts) live in internal/testkit/zkfleet.

// zkHandling is one handler call seen by a ZooKeeper-mode test listener.
type zkHandling struct {
	client     string
	id         string
	slot       int
	epoch      int64
	attempt    int
	start, end time.Time
	cancelled  error
}

type zkLog struct {
	mu      sync.Mutex
	hs      []zkHandling
	done    map[string]int
	running map[string]int // client -> handlers running now
}

func (l *zkLog) listener(client string, work time.Duration) consumer.MessageListener {
	return consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		h := zkHandling{client: client, id: m.ID, slot: m.Slot, epoch: m.Epoch, attempt: m.Attempt, start: time.Now()}
		l.mu.Lock()
		if l.running == nil {
			l.running = map[string]int{}
		}
		l.running[client]++
		l.mu.Unlock()
		select {
		case <-time.After(work):
		case <-ctx.Done():
			h.cancelled = context.Cause(ctx)
		}
		h.end = time.Now()
		l.mu.Lock()
		l.running[client]--
		l.hs = append(l.hs, h)
		if l.done == nil {
			l.done = map[string]int{}
		}
		l.done[m.ID]++
		l.mu.Unlock()
		return h.cancelled
	})
}

// runningAt reports how many handlers of client are running.
func (l *zkLog) runningAt(client string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.running[client]
}

func (l *zkLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.done)
}

func (l *zkLog) snapshot() []zkHandling {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]zkHandling(nil), l.hs...)
}

func startZK(t *testing.T) *zkserver.Server {
	t.Helper()
	return zktest.StartConfig(t, zkserver.Config{TickTime: 100 * time.Millisecond})
}

func (e *env) zkClient(srv *zkserver.Server, opts ...rmq.ZooKeeperOption) *rmq.Client {
	e.t.Helper()
	opts = append([]rmq.ZooKeeperOption{rmq.ZKSessionTimeout(2 * time.Second)}, opts...)
	return e.client(rmq.WithZooKeeper([]string{srv.Addr()}, opts...))
}

// waitPartition waits until the clients together own every slot exactly
// once, in shares that differ by at most one, and returns the shares.
func waitPartition(t *testing.T, tp topic.Topic, clients ...*rmq.Client) []int {
	t.Helper()
	var shares []int
	redistest.Poll(t, func() error {
		seen := map[int]int{}
		shares = make([]int, len(clients))
		for i, c := range clients {
			for s := range c.OwnedSlots(tp.Name()) {
				seen[s]++
				shares[i]++
			}
		}
		ok := len(seen) == tp.SlotAmount()
		for _, n := range seen {
			ok = ok && n == 1
		}
		for _, n := range shares { // balanced: shares differ by at most one
			ok = ok && n >= tp.SlotAmount()/len(clients) && n <= (tp.SlotAmount()+len(clients)-1)/len(clients)
		}
		if !ok {
			return fmt.Errorf("slots not partitioned: shares %v, %d of %d slots owned", shares, len(seen), tp.SlotAmount())
		}
		return nil
	})
	return shares
}

// Two clients split the slots evenly; each slot's messages are handled in
// order by one client at a time with the slot's owner epoch; when one
// client closes, the other takes its slots over.
func TestZKClientsSplitSlotsAndKeepKeyOrder(t *testing.T) {
	t.Parallel()
	srv := startZK(t)
	forEachBackend(t, func(t *testing.T, e *env) { testZKSplitAndOrder(t, e, srv) })
}

func testZKSplitAndOrder(t *testing.T, e *env, srv *zkserver.Server) {
	ctx := ctxT(t)
	tp := mustTopic(t, "zkorder", topic.FixedTime, 16)
	var log zkLog
	a, b := e.zkClient(srv), e.zkClient(srv)
	require.NoError(t, a.Register(tp, log.listener("a", time.Millisecond)))
	require.NoError(t, b.Register(tp, log.listener("b", time.Millisecond)))
	e.start(a)
	e.start(b)
	assert.Equal(t, []int{8, 8}, waitPartition(t, tp, a, b))
	assert.NotEqual(t, a.FleetMember(), b.FleetMember())

	p := a.Producer()
	const keys, perKey = 40, 25
	for seq := range perKey {
		for k := range keys {
			key := fmt.Sprintf("k%02d", k)
			_, err := p.SendFixedTime(ctx, tp, []byte(key), time.Now(), producer.WithKey(fmt.Sprintf("%s-%03d", key, seq)), producer.WithSlotBasis([]byte(key)))
			require.NoError(t, err)
		}
		if seq == perKey/2 {
			// Half-way, b leaves: a takes b's slots over.
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			require.NoError(t, b.Close(cctx))
			cancel()
		}
	}
	require.Eventually(t, func() bool { return log.count() == keys*perKey }, waitLong, 20*time.Millisecond)
	assert.Equal(t, []int{16}, waitPartition(t, tp, a))
	e.eventuallyCounts(tp, counts{})

	hs := log.snapshot()
	sort.Slice(hs, func(i, j int) bool { return hs[i].start.Before(hs[j].start) })
	last := map[string]zkHandling{}
	for _, h := range hs {
		require.NotZero(t, h.epoch, "ZooKeeper mode sets Message.Epoch")
		key, _, _ := strings.Cut(h.id, "-")
		if prev, ok := last[key]; ok {
			assert.Less(t, prev.id, h.id, "key %s out of order", key)
			assert.False(t, h.start.Before(prev.end), "key %s handled twice at once", key)
			if prev.slot == h.slot && prev.client != h.client {
				assert.Greater(t, h.epoch, prev.epoch, "a new owner has a newer epoch")
			}
		}
		last[key] = h
	}
	for id, n := range log.done {
		assert.Equal(t, 1, n, "%s handled %d times", id, n)
	}
}

// Close in ZooKeeper mode returns an unfinished delivery to store at its
// original position without counting an attempt.
func TestZKCloseReturnsUnfinishedToStore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv := startZK(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "zkclose", topic.FixedTime, 1)
	c := e.zkClient(srv)
	started := make(chan struct{})
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})))
	due := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	_, err := c.Producer().SendFixedTime(ctx, tp, []byte("x"), due, producer.WithKey("job"))
	require.NoError(t, err)
	e.start(c)
	<-started
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = c.Close(cctx)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	k := e.keys(tp, 0)
	score, ok := e.zscore(k.Store, "job")
	require.True(t, ok, "back in store")
	assert.Equal(t, float64(due.UnixMilli()), score, "at its original due time")
	env, ok := e.envelope(k.Msg, "job")
	require.True(t, ok)
	assert.Equal(t, 0, env.Failures, "no attempt counted")
	assert.Equal(t, counts{Store: 1, Msg: 1}, e.counts(tp))

	// The next owner gets it as attempt 1 again.
	rec := newRecorder(nil)
	c2 := e.zkClient(srv)
	require.NoError(t, c2.Register(tp, rec))
	e.start(c2)
	d := rec.next(t, waitLong)
	assert.Equal(t, "job", d.ID)
	assert.Equal(t, 1, d.Attempt)
}

// cutDialer lets a test take the network to ZooKeeper away from one client.
type cutDialer struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (d *cutDialer) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cut {
		return nil, errors.New("network cut by test")
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *cutDialer) setCut(cut bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut = cut
	if cut {
		for _, c := range d.conns {
			c.Close()
		}
		d.conns = nil
	}
}

// A worker cut off from ZooKeeper pauses, then cancels its handlers before
// its session can expire; only then does another worker take its slots.
// When the network comes back it rejoins with a new session.
func TestZKCutOffWorkerStopsBeforeTakeover(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv := startZK(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "zkcut", topic.Priority, 4)
	var net cutDialer
	var log zkLog
	a := e.zkClient(srv, rmq.ZKDialer(net.dial))
	b := e.zkClient(srv)
	require.NoError(t, a.Register(tp, log.listener("a", time.Hour)))
	require.NoError(t, b.Register(tp, log.listener("b", time.Millisecond)))
	e.start(a)
	e.start(b)
	waitPartition(t, tp, a, b)
	aSlots := a.OwnedSlots(tp.Name())
	require.Len(t, aSlots, 2)
	// One message on each of a's slots: a's handlers block until cancelled.
	for i := 0; len(aSlots) > 0; i++ {
		key := fmt.Sprintf("m%d", i)
		s := slots.IndexString(key, tp.SlotAmount())
		if _, mine := aSlots[s]; !mine {
			continue
		}
		delete(aSlots, s)
		_, err := a.Producer().SendPriority(ctx, tp, []byte(key), 100, producer.WithKey(key))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return log.runningAt("a") == 2 }, waitLong, 10*time.Millisecond, "both handlers running at a")
	require.Len(t, a.OwnedSlots(tp.Name()), 2)
	cutAt := time.Now()
	net.setCut(true)

	require.Eventually(t, func() bool { return log.count() == 2 }, waitLong, 10*time.Millisecond)
	hs := log.snapshot()
	var aEnd time.Time
	for _, h := range hs {
		if h.client == "a" {
			assert.ErrorIs(t, h.cancelled, consumer.ErrOwnershipLost)
			aEnd = maxT(aEnd, h.end)
		}
	}
	t.Logf("a stopped its handlers %v after the cut", aEnd.Sub(cutAt))
	// b takes the slots over (after a's session expired) and handles both
	// messages again, attempt not counted.
	require.Eventually(t, func() bool { return log.count() == 2 && len(log.snapshot()) == 4 }, waitLong, 10*time.Millisecond)
	for _, h := range log.snapshot() {
		if h.client == "b" {
			assert.True(t, h.start.After(aEnd), "b started %v before a stopped", aEnd.Sub(h.start))
			assert.Equal(t, 1, h.attempt)
			t.Logf("b took over %s %v after the cut", h.id, h.start.Sub(cutAt))
		}
	}
	assert.Equal(t, []int{4}, waitPartition(t, tp, b))

	// Back on the network, a rejoins (a new session) and gets its share.
	net.setCut(false)
	assert.Equal(t, []int{2, 2}, waitPartition(t, tp, a, b))
	e.eventuallyCounts(tp, counts{})
}

func maxT(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// A joining client takes exactly its share, all of it from the others (who
// gain nothing); when it leaves again only its slots move.
func TestZKJoinAndLeaveMoveOnlyTheNecessarySlots(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv := startZK(t)
	tp := mustTopic(t, "zkmoves", topic.Priority, 64)
	var log zkLog
	newClient := func(name string) *rmq.Client {
		c := e.zkClient(srv)
		require.NoError(t, c.Register(tp, log.listener(name, time.Millisecond)))
		e.start(c)
		return c
	}
	slotSet := func(c *rmq.Client) map[int]bool {
		out := map[int]bool{}
		for s := range c.OwnedSlots(tp.Name()) {
			out[s] = true
		}
		return out
	}
	subset := func(a, b map[int]bool) bool {
		for s := range a {
			if !b[s] {
				return false
			}
		}
		return true
	}
	a, b := newClient("a"), newClient("b")
	assert.Equal(t, []int{32, 32}, waitPartition(t, tp, a, b))
	a1, b1 := slotSet(a), slotSet(b)

	c := newClient("c")
	shares := waitPartition(t, tp, a, b, c)
	a2, b2, c2 := slotSet(a), slotSet(b), slotSet(c)
	assert.True(t, subset(a2, a1) && subset(b2, b1), "a and b only gave slots away")
	assert.Equal(t, len(c2), (len(a1)-len(a2))+(len(b1)-len(b2)), "exactly c's share moved")
	t.Logf("join: shares %v, %d slots moved", shares, len(c2))

	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	require.NoError(t, c.Close(cctx))
	cancel()
	assert.Equal(t, []int{32, 32}, waitPartition(t, tp, a, b))
	a3, b3 := slotSet(a), slotSet(b)
	assert.True(t, subset(a2, a3) && subset(b2, b3), "a and b kept their slots and took only c's")
}

// Close in ZooKeeper mode ends every goroutine the client, its coordinator
// and go-zookeeper started (not parallel: goleak must see only this test).
func TestZKCloseLeavesNoGoroutine(t *testing.T) {
	e := newEnv(t)
	srv := startZK(t)
	ignore := leakBaseline(t, e)
	tp := mustTopic(t, "zkleak", topic.FixedTime, 8)
	c, err := rmq.New(e.rdb, rmq.WithPrefix(e.prefix), rmq.WithLogger(e.logger),
		rmq.WithZooKeeper([]string{srv.Addr()}, rmq.ZKSessionTimeout(time.Second)))
	require.NoError(t, err)
	rec := newRecorder(nil)
	require.NoError(t, c.Register(tp, rec))
	e.start(c)
	_, err = c.Producer().SendFixedTime(ctxT(t), tp, []byte("x"), time.Now(), producer.WithKey("x"))
	require.NoError(t, err)
	d := rec.next(t, waitLong)
	assert.NotZero(t, d.Token)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.Close(ctx))
	goleak.VerifyNone(t, ignore)
}

// Start fails within its context when ZooKeeper cannot be reached, and
// leaves the consumers closed.
func TestZKStartWithoutZooKeeperFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	c := e.client(rmq.WithZooKeeper([]string{addr}, rmq.ZKSessionTimeout(time.Second)))
	require.NoError(t, c.Register(mustTopic(t, "zknone", topic.FixedTime, 2), newRecorder(nil)))
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	begin := time.Now()
	err = c.Start(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(begin), 5*time.Second)
}
