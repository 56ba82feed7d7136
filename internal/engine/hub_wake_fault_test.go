package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// holeProxy forwards loopback TCP connections to a target until blackhole
// is called: from then on the connections open at that moment stay open
// but nothing passes through them any more, either way (a network that
// drops packets); connections made later pass again.
type holeProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex
	pairs map[*atomic.Bool][2]net.Conn
}

func startHoleProxy(t *testing.T, target string) *holeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &holeProxy{ln: ln, target: target, pairs: map[*atomic.Bool][2]net.Conn{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for _, pair := range p.pairs {
			_ = pair[0].Close()
			_ = pair[1].Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *holeProxy) addr() string { return p.ln.Addr().String() }

func (p *holeProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		hole := &atomic.Bool{}
		p.mu.Lock()
		p.pairs[hole] = [2]net.Conn{c, s}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, s, hole)
		go p.pipe(s, c, hole)
	}
}

// pipe copies src to dst, dropping what arrives once hole is set.
func (p *holeProxy) pipe(src, dst net.Conn, hole *atomic.Bool) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !hole.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = src.Close()
			}
			_ = dst.Close()
			return
		}
	}
}

// blackhole stops every connection open now.
func (p *holeProxy) blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for hole := range p.pairs {
		hole.Store(true)
	}
}

// A subscription connection that silently stops passing anything (no
// reset, no close) is noticed by the health check (a PING without answer)
// and made again: a message sent meanwhile is handled within seconds,
// although the consumer's fetcher sleeps up to a minute when idle.
func TestWakeHubBlackholedSubscription(t *testing.T) {
	srv := redistest.Start(t, redisserver.Config{})
	proxy := startHoleProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: proxy.addr(), DisableIdentity: true, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond, DialTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := redistest.Prefix(t)
	tp := topic.MustNew("hole", topic.FixedTime, 4)
	got := make(chan string, 16)
	h := newHub(t, rdb, prefix)
	h.wake.Tune.HealthEvery = 300 * time.Millisecond
	c, err := h.newEngine(tp, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
		got <- m.ID
		return nil
	}))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, c.Close(ctx))
	})
	p := newProducer(redistest.Client(t, srv), prefix)
	send := func(id string) {
		t.Helper()
		_, err := p.SendFixedTime(ctx, tp, []byte(id), time.Now(), producer.WithKey(id))
		require.NoError(t, err)
	}
	expect := func(id string, within time.Duration) {
		t.Helper()
		select {
		case m := <-got:
			require.Equal(t, id, m)
		case <-time.After(within):
			t.Fatalf("%s not handled within %v", id, within)
		}
	}
	// settled waits until the last message's ack reached Redis (nothing
	// in prepare) and the fetcher fell asleep: what is sent next comes to
	// it only by a wake-up.
	admin := redistest.Client(t, srv)
	settled := func() {
		t.Helper()
		redistest.Poll(t, func() error {
			for i := range tp.SlotAmount() {
				if n := admin.ZCard(ctx, keyspace.KeysFor(prefix, tp, i).Prepare).Val(); n != 0 {
					return fmt.Errorf("slot %d: %d in prepare", i, n)
				}
			}
			return nil
		})
		waitFetchersAsleep(t, 1)
	}
	settled()
	send("before")
	expect("before", 2*time.Second)

	settled()
	proxy.blackhole()
	send("in the hole") // its wake-up is lost in the hole
	expect("in the hole", 10*time.Second)
	settled()
	send("after")
	expect("after", 2*time.Second)
}
