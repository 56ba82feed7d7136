package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/engine/ack"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// Acks of many topics that wait together ride one round: one ack.lua call
// on a single node for pulled acks, acks by id and refused acks of ten
// topics, each answered exactly as alone. Redis is paused for writes while
// the acks queue, so the first two rounds (one ack each) are held in
// flight and the thirty others must wait for the third.
func TestAckMuxMergesTopicsIntoOneCall(t *testing.T) {
	srv := redistest.Start(t, redisserver.Config{})
	// Read timeouts past the pause: the held rounds must not time out.
	rdb := redistest.Client(t, srv, func(o *redis.Options) { o.ReadTimeout = 30 * time.Second })
	ctl := redistest.Client(t, srv)
	prefix := redistest.Prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	h := newHub(t, rdb, prefix)
	p := newProducer(rdb, prefix)
	start := func(tp topic.Topic) *Engine {
		c, err := h.newPuller(tp, nil)
		require.NoError(t, err)
		require.NoError(t, c.Start(ctx))
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	}
	// pull takes n deliveries, waiting as Pull says for the next due one
	// (due times are rounded up to the next ms).
	pull := func(c *Engine, n int) []*Pulled {
		var out []*Pulled
		for len(out) < n {
			got, wait, err := c.Pull(ctx, n-len(out), 30*time.Second)
			require.NoError(t, err)
			out = append(out, got...)
			if len(out) < n {
				require.GreaterOrEqual(t, wait, time.Duration(0), "more to come due")
				time.Sleep(wait + time.Millisecond)
			}
		}
		return out
	}

	// A dead-lettered delivery: its ack by id is refused.
	deadTp := topic.MustNew("acks.dead", topic.FixedTime, 1)
	deadEng := start(deadTp)
	_, err := p.SendFixedTime(ctx, deadTp, []byte("d"), time.Now(), producer.WithKey("dead"), producer.WithMaxRetries(0))
	require.NoError(t, err)
	dead := pull(deadEng, 1)[0]
	require.NoError(t, dead.Nack(ctx, 0, errors.New("no")))
	require.NoError(t, rdb.ZScore(ctx, keyspace.KeysFor(prefix, deadTp, 0).Dead, "dead").Err())

	// Ten topics of both score kinds and several slots, three in flight
	// each.
	type topicCase struct {
		tp topic.Topic
		ds []*Pulled
	}
	var cases []topicCase
	for i := range 10 {
		var tp topic.Topic
		if i%2 == 0 {
			tp = topic.MustNew(fmt.Sprintf("acks.ft%d", i), topic.FixedTime, 4)
		} else {
			tp = topic.MustNew(fmt.Sprintf("acks.pr%d", i), topic.Priority, 2)
		}
		c := start(tp)
		for j := range 3 {
			key := producer.WithKey(fmt.Sprintf("m%d-%d", i, j))
			if tp.Type() == topic.Priority {
				_, err = p.SendPriority(ctx, tp, []byte("x"), 100, key)
			} else {
				_, err = p.SendFixedTime(ctx, tp, []byte("x"), time.Now(), key)
			}
			require.NoError(t, err)
		}
		cases = append(cases, topicCase{tp: tp, ds: pull(c, 3)})
	}

	// Per topic: a pulled ack (done), an ack by id (done), and the ack of
	// a stale token of the third delivery (refused, ErrLeaseLost); then an
	// ack by id of an unknown id and of the dead-lettered one (both false).
	type result struct {
		what string
		err  error
		ok   bool
	}
	var jobs []func() result
	for _, tc := range cases {
		tc := tc
		jobs = append(jobs,
			func() result { return result{what: "ack " + tc.ds[0].ID, err: tc.ds[0].Ack(ctx)} },
			func() result {
				ok, err := h.AckByID(ctx, prefix, tc.tp, tc.ds[1].Slot, tc.ds[1].ID, nil)
				return result{what: "by id " + tc.ds[1].ID, ok: ok, err: err}
			},
			func() result {
				m := *tc.ds[2].Message
				m.Token++
				stale := &Pulled{Message: &m, e: tc.ds[2].e}
				return result{what: "stale " + m.ID, err: stale.Ack(ctx)}
			})
	}
	jobs = append(jobs,
		func() result {
			ok, err := h.AckByID(ctx, prefix, cases[0].tp, 0, "nobody", nil)
			return result{what: "unknown", ok: ok, err: err}
		},
		func() result {
			ok, err := h.AckByID(ctx, prefix, deadTp, 0, "dead", nil)
			return result{what: "dead", ok: ok, err: err}
		})

	m := h.acks
	rounds0, calls0 := m.Rounds.Load(), m.Calls.Load()
	require.NoError(t, ctl.Do(ctx, "CLIENT", "PAUSE", 30000, "WRITE").Err())
	unpaused := false
	defer func() {
		if !unpaused {
			_ = ctl.Do(context.Background(), "CLIENT", "UNPAUSE").Err()
		}
	}()
	results := make([]result, len(jobs))
	var wg sync.WaitGroup
	for i, job := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = job()
		}()
	}
	// The first two acks each started a round, held by the pause; every
	// other one queues behind them.
	require.Eventually(t, func() bool {
		return m.Rounds.Load()-rounds0 == ack.RoundsInFlight && m.Queued() == len(jobs)-ack.RoundsInFlight
	}, 20*time.Second, time.Millisecond)
	require.NoError(t, ctl.Do(ctx, "CLIENT", "UNPAUSE").Err())
	unpaused = true
	wg.Wait()

	assert.Equal(t, int64(3), m.Rounds.Load()-rounds0, "rounds for %d acks", len(jobs))
	assert.Equal(t, int64(3), m.Calls.Load()-calls0, "one ack.lua call per round on a single node")
	for i, r := range results {
		switch {
		case i == len(jobs)-2 || i == len(jobs)-1:
			assert.NoError(t, r.err, r.what)
			assert.False(t, r.ok, r.what)
		case i%3 == 0:
			assert.NoError(t, r.err, r.what)
		case i%3 == 1:
			assert.NoError(t, r.err, r.what)
			assert.True(t, r.ok, r.what)
		default:
			assert.ErrorIs(t, r.err, consumer.ErrLeaseLost, r.what)
		}
	}

	// Only the third delivery of each topic is left in prepare; its own
	// token still acks it.
	for _, tc := range cases {
		for j, d := range tc.ds {
			err := rdb.ZScore(ctx, keyspace.KeysFor(prefix, tc.tp, d.Slot).Prepare, d.ID).Err()
			if j == 2 {
				assert.NoError(t, err, "%s still in flight", d.ID)
				assert.NoError(t, d.Ack(ctx), d.ID)
			} else {
				assert.Equal(t, redis.Nil, err, "%s acked", d.ID)
			}
		}
	}
	assert.NoError(t, rdb.ZScore(ctx, keyspace.KeysFor(prefix, deadTp, 0).Dead, "dead").Err(), "still dead")
}
