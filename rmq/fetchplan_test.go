package rmq_test

import (
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/topic"
)

// fetchGroups records how many slots each fetch.lua call names.
type fetchGroups struct {
	mu     sync.Mutex
	groups []int
}

func (f *fetchGroups) observe(cmd redis.Cmder) {
	if sha, ok := rmqtest.ScriptSHA(cmd); !ok || sha != scripts.Fetch.Hash() {
		return
	}
	nkeys, ok := cmd.Args()[2].(int)
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.groups = append(f.groups, nkeys/3)
}

// On a single node, a consumer draining a backlog spread over 16 slots
// names only a few of them per fetch (the best ones, bounded by the next
// one's head) once it has seen that each slot gives many messages, and
// still handles every message once, earliest due first.
func TestBacklogFetchesNameFewSlots(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	tp := mustTopic(t, "fewslots", topic.FixedTime, 16)
	seen := &fetchGroups{}
	rdb := e.newRedis()
	rdb.AddHook(redistest.Observer{Before: seen.observe})
	c := e.clientOn(rdb)
	rec := newRecorder(nil)
	// WithPrefetch(1) keeps the fetches at about the handlers' size: the
	// prefetch a backlog brings (adaptBacklog) asks for up to 2,048 at
	// once, which every slot of this backlog must give.
	require.NoError(t, c.Register(tp, rec, consumer.WithConcurrency(32), consumer.WithPrefetch(1)))
	const n = 1600
	base := time.Now().Add(-time.Minute)
	// 100 messages per due millisecond, spread over the slots: each slot
	// holds several of every millisecond.
	msgs := dueBatch(n, func(i int) time.Time { return base.Add(time.Duration(i/100) * time.Millisecond) })
	_, err := c.Producer().SendBatch(ctx, tp, msgs)
	require.NoError(t, err)
	e.start(c)

	got := rec.nextN(t, n, waitLong)
	ids := map[string]bool{}
	for i, d := range got {
		ids[d.ID] = true
		if i > 0 {
			// Up to 32 run at once, so neighbours may swap, but no
			// message overtakes one due more than a few ms before it.
			assert.False(t, d.DueAt.Before(got[i-1].DueAt.Add(-20*time.Millisecond)), "%s (due %v) after one due %v", d.ID, d.DueAt, got[i-1].DueAt)
		}
	}
	assert.Len(t, ids, n, "each message once")
	e.eventuallyCounts(tp, counts{})

	seen.mu.Lock()
	defer seen.mu.Unlock()
	require.NotEmpty(t, seen.groups)
	total := 0
	for _, g := range seen.groups {
		total += g
	}
	mean := float64(total) / float64(len(seen.groups))
	assert.LessOrEqual(t, mean, 8.0, "slots named per fetch, on average, over %d fetches", len(seen.groups))
	t.Logf("%d fetch calls named %.1f slots each on average", len(seen.groups), mean)
}
