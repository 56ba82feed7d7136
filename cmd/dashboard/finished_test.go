package dashboard_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/dashboard"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// The finished listing of a retaining topic pages through every kept
// cancelled message once, newest first, and shows each one's state; a
// topic that retains nothing says so.
func TestFinishedListing(t *testing.T) {
	e := newEnv(t, dashboard.WithPageSize(2))
	tp := e.topic("jobs", topic.FixedTime, 4)
	e.send(tp, "still-waiting", "x")
	page := e.get("finished?topic=jobs")
	assert.Contains(t, page, `id="no-retention"`)
	assert.Empty(t, ids(t, page, "finished"))

	e.setLife(tp, rmq.Lifecycle{Retention: time.Hour})
	sent := []string{"j1", "j2", "j3", "j4", "j5"}
	for _, id := range sent {
		e.send(tp, id, "x")
	}
	for _, id := range sent {
		ok, err := e.insp.Cancel(context.Background(), tp, id)
		require.NoError(t, err)
		require.True(t, ok)
	}
	var listed []string
	path := "finished?topic=jobs"
	for pages := 0; path != ""; pages++ {
		require.Less(t, pages, 5, "paging does not end")
		page := e.get(path)
		assert.NotContains(t, page, `id="no-retention"`)
		got := ids(t, page, "finished")
		assert.LessOrEqual(t, len(got), 2)
		listed = append(listed, got...)
		path = link(t, page, "finished-next")
	}
	assert.ElementsMatch(t, sent, listed, "each kept message once, no waiting one")
	var at []time.Time
	for _, id := range listed {
		m, err := e.insp.Message(context.Background(), tp, id)
		require.NoError(t, err)
		assert.Equal(t, rmq.StateCancelled, m.State)
		at = append(at, m.FinishedAt)
	}
	assert.True(t, slices.IsSortedFunc(at, func(a, b time.Time) int { return b.Compare(a) }), "newest first: %v", at)
	assert.Contains(t, e.get("finished?topic=jobs"), `<span class="badge state">cancelled</span>`)
	assert.Contains(t, e.get("topic?name=jobs"), `href="finished?topic=jobs" id="finished-link"`)

	code, _, _ := e.do("GET", "finished?topic=jobs&c=bogus", nil, nil)
	assert.Equal(t, 400, code)
}
