package dashboard_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/topic"
)

// TestOnACluster runs the pages and an action against a Redis Cluster: a
// topic's slots live on several masters, and the Redis section lists each.
func TestOnACluster(t *testing.T) {
	e := newEnvOn(t, redistest.ClusterClient(t, redistest.SharedCluster(t)))
	tp := e.topic("orders", topic.FixedTime, 8)
	e.makeDead(tp, "boom", "a", "x", "b", "y", "c", "z")
	e.send(e.topic("jobs", topic.Priority, 4), "j", "x")

	overview := e.get("")
	assert.Contains(t, overview, `data-topic="orders"`)
	assert.Equal(t, 3, strings.Count(overview, "<td>7."), "one row per master")
	page := e.get("topic?name=orders")
	assert.ElementsMatch(t, []string{"a", "b", "c"}, ids(t, page, "dead"))
	assert.Contains(t, e.get("message?topic=orders&id=b"), "boom")
	assert.Equal(t, "Requeued 2 messages.", e.act(url.Values{"op": {"requeue"}, "topic": {"orders"}, "id": {"a", "c"}}))
	assert.ElementsMatch(t, []string{"a", "c"}, ids(t, e.get("topic?name=orders"), "waiting"))
	assert.Contains(t, e.get("message?topic=jobs&id=j"), `<span class="badge state">waiting</span>`)
}
