package dashboard_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// The finished listing of a retaining topic lists messages a consumer
// completed, with their results, and finds one by id; an id the topic
// keeps no finished message of (waiting, unknown) shows none.
func TestFinishedCompletedAndSearch(t *testing.T) {
	e := newEnv(t)
	tp := e.topic("jobs", topic.FixedTime, 4)
	e.setLife(tp, rmq.Lifecycle{Retention: time.Hour})
	for _, id := range []string{"done-1", "done-2"} {
		e.send(tp, id, "x")
	}
	c := e.client(tp, func(_ context.Context, m *consumer.Message) error {
		m.SetResult([]byte("rendered " + m.ID))
		return nil
	})
	e.waitFor("2 completed", func() bool {
		for _, id := range []string{"done-1", "done-2"} {
			m, err := e.insp.Message(context.Background(), tp, id)
			if err != nil || m.State != rmq.StateCompleted {
				return false
			}
		}
		return true
	})
	closeClient(t, c)
	e.send(tp, "later", "x") // waiting: no consumer runs now

	page := e.get("finished?topic=jobs")
	assert.ElementsMatch(t, []string{"done-1", "done-2"}, ids(t, page, "finished"))
	assert.Contains(t, page, `<span class="badge state">completed</span>`)
	assert.Contains(t, page, `<code>rendered done-2</code>`)

	page = e.get("finished?topic=jobs&id=done-2")
	assert.Equal(t, []string{"done-2"}, ids(t, page, "finished"))
	assert.Contains(t, page, `<code>rendered done-2</code>`)
	assert.Equal(t, "finished?topic=jobs", link(t, page, "finished-first"))
	assert.NotContains(t, page, `id="finished-next"`)
	for _, id := range []string{"later", "never-sent"} {
		page = e.get("finished?topic=jobs&id=" + id)
		assert.Empty(t, ids(t, page, "finished"), id)
		assert.Contains(t, page, "jobs keeps no finished message with id "+id+".", id)
	}
	code, _, _ := e.do("GET", "finished?topic=nope&id=done-1", nil, nil)
	require.Equal(t, 404, code)
}
