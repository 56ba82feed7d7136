package rmq_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// The lookahead is invisible: a sender, a remover and a listener are told
// what they would have been told had the held message waited in store.

// sendLog records what every send of a client did (rmq.Observer).
type sendLog struct {
	rmq.BaseObserver
	mu  sync.Mutex
	got []producer.SendResult
}

func (l *sendLog) Sent(_ topic.Topic, r producer.SendResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, r)
}

func (l *sendLog) results() []producer.SendResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]producer.SendResult(nil), l.got...)
}

// heldEnv is a started client consuming tp with a 2 s lookahead, whose
// listener passes every message on, and an observer of its sends.
type heldEnv struct {
	e    *env
	tp   topic.Topic
	c    *rmq.Client
	sent *sendLog
	got  chan *consumer.Message
}

func newHeldEnv(t *testing.T, name string, typ topic.Type) *heldEnv {
	h := &heldEnv{e: newEnv(t), tp: mustTopic(t, name, typ, 4), sent: &sendLog{}, got: make(chan *consumer.Message, 16)}
	h.c = h.e.client(rmq.WithObserver(h.sent))
	require.NoError(t, h.c.Register(h.tp, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
		h.got <- m
		return nil
	}), consumer.WithLookahead(testLookahead)))
	h.e.start(h.c)
	return h
}

// send sends body under key k, due in d (range-merge: a window of d).
func (h *heldEnv) send(t *testing.T, body string, d time.Duration) {
	t.Helper()
	var err error
	if h.tp.Type() == topic.RangeMerge {
		_, err = h.c.Producer().SendRangeMerge(ctxT(t), h.tp, []byte(body), d, producer.WithKey("k"))
	} else {
		_, err = h.c.Producer().SendFixedTime(ctxT(t), h.tp, []byte(body), time.Now().Add(d), producer.WithKey("k"))
	}
	require.NoError(t, err)
}

// waitHeld waits until the client holds k: in prepare with a held token.
func (h *heldEnv) waitHeld(t *testing.T) {
	t.Helper()
	waitHeldIn(t, h.e, h.tp)
}

func waitHeldIn(t *testing.T, e *env, tp topic.Topic) {
	t.Helper()
	k := e.keys(tp, slotOfKey(tp, "k"))
	require.Eventually(t, func() bool {
		s, ok := e.zscore(k.Prepare, "k")
		_, token := scripts.SplitPrepareScore(s)
		return ok && scripts.IsHeld(token)
	}, 5*time.Second, time.Millisecond, "held before its instant")
}

func (h *heldEnv) next(t *testing.T) *consumer.Message {
	t.Helper()
	select {
	case m := <-h.got:
		return m
	case <-time.After(waitLong):
		t.Fatal("no delivery")
		return nil
	}
}

// A send of a held id is told what a send into a waiting message is told:
// a range-merge repeat merged (SendMerged), a fixed-time re-send replaced
// (SendReplaced), never SendRestored (a new delivery after the first). One
// delivery follows, with the new body, the first attempt, and a FetchedAt
// of its hand-over, not before its instant.
func TestLookaheadSendToHeldAnswersAsInStore(t *testing.T) {
	for _, typ := range []topic.Type{topic.RangeMerge, topic.FixedTime} {
		t.Run(typ.String(), func(t *testing.T) {
			h := newHeldEnv(t, "ans"+typ.String(), typ)
			h.send(t, "first", time.Second)
			h.waitHeld(t)
			h.send(t, "second", 1500*time.Millisecond)
			want := producer.SendMerged
			if typ == topic.FixedTime {
				want = producer.SendReplaced
			}
			assert.Equal(t, []producer.SendResult{producer.SendStored, want}, h.sent.results())
			m := h.next(t)
			assert.Equal(t, "second", string(m.Body))
			assert.Equal(t, 1, m.Attempt)
			assert.False(t, m.FetchedAt.Before(m.DueAt), "FetchedAt %v before DueAt %v", m.FetchedAt, m.DueAt)
			// One delivery only: after it, nothing of k is left anywhere.
			h.e.eventuallyCounts(h.tp, counts{})
			select {
			case m := <-h.got:
				t.Fatalf("a second delivery: %q", m.Body)
			default:
			}
		})
	}
}

// A remove of a held message finds it waiting, as in store, and nothing is
// delivered.
func TestLookaheadRemoveOfHeldFindsItWaiting(t *testing.T) {
	h := newHeldEnv(t, "ansrm", topic.FixedTime)
	h.send(t, "b", time.Second)
	h.waitHeld(t)
	removed, err := h.c.Producer().Remove(ctxT(t), h.tp, "k")
	require.NoError(t, err)
	assert.Equal(t, producer.RemovedWaiting, removed)
	assert.Equal(t, counts{}, h.e.counts(h.tp), "nothing left: no tombstone")
	// A marker due after k's instant arrives alone.
	_, err = h.c.Producer().SendFixedTime(ctxT(t), h.tp, []byte("marker"), time.Now().Add(1500*time.Millisecond), producer.WithKey("marker"))
	require.NoError(t, err)
	assert.Equal(t, "marker", h.next(t).ID)
}

// A held message's FetchedAt is the moment it was handed to the listener,
// not the moment the lookahead took it.
func TestLookaheadFetchedAtIsTheHandOver(t *testing.T) {
	h := newHeldEnv(t, "ansat", topic.FixedTime)
	h.send(t, "b", 800*time.Millisecond)
	h.waitHeld(t)
	heldAt := time.Now()
	m := h.next(t)
	assert.False(t, m.FetchedAt.Before(m.DueAt), "FetchedAt %v before DueAt %v", m.FetchedAt, m.DueAt)
	assert.True(t, m.FetchedAt.After(heldAt), "FetchedAt is the hand-over, after the hold began")
}

// A consumer process killed with SIGKILL while it holds a message for its
// instant never ran it: once the held lease runs out, another consumer's
// sweeper puts it back and it is delivered as the first attempt, with no
// last error, as if it had waited in store.
func TestLookaheadHeldLeaseLapseCountsNoAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tp := mustTopic(t, "anslapse", topic.FixedTime, 1)
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(),
		workerEnv+"=1",
		workerAddrEnv+"="+e.addrs(),
		workerClusterEnv+"=0",
		workerPrefixEnv+"="+e.prefix,
		workerTopicEnv+"="+tp.Name(),
		workerLookaheadEnv+"="+testLookahead.String(),
	)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	waited := false
	t.Cleanup(func() {
		if !waited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("worker stderr:\n%s", stderr.String())
		}
	})
	// The worker's consumer is up once its topic definition is stored.
	require.Eventually(t, func() bool {
		n, err := e.rdb.HLen(ctxT(t), keyspace.TopicsKey(e.prefix)).Result()
		return err == nil && n > 0
	}, 30*time.Second, 10*time.Millisecond, "worker did not start")
	_, err = e.client().Producer().SendFixedTime(ctxT(t), tp, []byte("work"), time.Now().Add(1500*time.Millisecond), producer.WithKey("k"))
	require.NoError(t, err)
	waitHeldIn(t, e, tp)
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	waited = true

	c := e.client()
	rec := newRecorder(nil)
	require.NoError(t, c.Register(tp, rec, consumer.WithSweepInterval(200*time.Millisecond), consumer.WithLookahead(0)))
	e.start(c)
	d := rec.next(t, 15*time.Second)
	assert.Equal(t, "k", d.ID)
	assert.Equal(t, 1, d.Attempt, "the hold counted no attempt")
	assert.Empty(t, d.LastError)
	assert.False(t, d.At.Before(d.DueAt))
	e.eventuallyCounts(tp, counts{})
}
