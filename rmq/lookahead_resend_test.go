package rmq_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/faultproxy"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// A held message whose confirm reply is lost, which go-redis sends again,
// is handed over once, at its instant, with the token its first run gave
// it: the second run finds the call's own record (confirm.lua) and answers
// the same, so the listener runs once and its ack is the delivery's.
func TestLookaheadConfirmResentDeliversOnce(t *testing.T) {
	confirmReplyLost(t, "lookresend", 3)
}

// A confirm call that fails on the client's side after Redis ran it (its
// reply lost, and no resend: MaxRetries -1) leaves the message handed over
// in Redis; the holder's next call names the failed call's record and
// hands it over then, at once and as the first attempt, instead of
// finding it gone and leaving it to its lease.
func TestLookaheadConfirmFailedThenRetriedDeliversOnce(t *testing.T) {
	confirmReplyLost(t, "lookfailed", -1)
}

// confirmReplyLost holds one message of a topic named name on a client
// whose go-redis resends a failed call maxRetries times, loses the reply
// of the confirm call that hands it over, and checks it is delivered once,
// not early, as its first attempt, and acked.
func confirmReplyLost(t *testing.T, name string, maxRetries int) {
	e := newEnv(t)
	proxy, err := faultproxy.Start(e.srv.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: maxRetries})
	t.Cleanup(func() { _ = rdb.Close() })
	tp := mustTopic(t, name, topic.FixedTime, 4)
	outcomes := make(chan consumer.Outcome, 4)
	rec := newRecorder(nil)
	c := e.clientOn(rdb, rmq.WithObserver(outcomeObserver(outcomes)))
	require.NoError(t, c.Register(tp, rec, consumer.WithLookahead(testLookahead)))
	e.start(c)

	due := time.Now().Add(1800 * time.Millisecond)
	_, err = c.Producer().SendFixedTime(ctxT(t), tp, []byte("b"), due, producer.WithKey("k"))
	require.NoError(t, err)
	k := e.keys(tp, slotOfKey(tp, "k"))
	require.Eventually(t, func() bool { _, ok := e.zscore(k.Prepare, "k"); return ok }, 1200*time.Millisecond, time.Millisecond, "held before its instant")
	proxy.DropReplyTo([]byte(scripts.Confirm.Hash()))

	d := rec.next(t, 5*time.Second)
	assert.Equal(t, "b", d.Body)
	assert.Equal(t, 1, d.Attempt)
	assert.False(t, d.At.Before(d.DueAt))
	assert.Equal(t, consumer.Acked, <-outcomes)
	assert.EqualValues(t, 1, proxy.Dropped(), "the fault happened")
	rec.drained(t, e, tp, counts{})
	select {
	case o := <-outcomes:
		t.Fatalf("a second outcome %v", o)
	default:
	}
}
