package rmq_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/rmq"
)

// A message that finishes between a Wait's registration and its first
// read of the state, on a topic that retains nothing: the read finds
// nothing, but the finish came after the Wait began and its word is on
// the way: Wait returns the end it tells (completed with the result), not
// ErrMessageNotFound. The finish is made to land in that window by a hook
// on the waiting client's registration (HINCRBY of the waiters hash).
// An id never sent is still ErrMessageNotFound.
func TestWaitFinishRightAfterRegistration(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	r := newLifeRig(t, e, "waitrace", 2, rmq.Lifecycle{})
	token := r.sendAndFetch("j1")
	var once sync.Once
	rdb := e.newRedis()
	rdb.AddHook(redistest.Observer{After: func(c redis.Cmder) {
		if strings.EqualFold(c.Name(), "hincrby") && c.Err() == nil {
			once.Do(func() { r.complete("j1", token, "done") })
		}
	}})
	c := e.clientOn(rdb)
	wctx, cancel := context.WithTimeout(ctx, waitLong)
	defer cancel()
	m, err := c.Wait(wctx, r.tp, "j1")
	require.NoError(t, err)
	assert.Equal(t, rmq.StateCompleted, m.State)
	assert.Equal(t, "done", string(m.Result))

	_, err = c.Wait(wctx, r.tp, "never-sent")
	require.ErrorIs(t, err, rmq.ErrMessageNotFound)
}
