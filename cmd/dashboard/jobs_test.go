package dashboard_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

func TestTopicPageListsDelayedPriorityMessages(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tp := e.topic("jobs", topic.Priority, 2)
	for key, d := range map[string]time.Duration{"in3h": 3 * time.Hour, "in1h": time.Hour, "in2h": 2 * time.Hour} {
		_, err := e.prod.SendPriority(ctx, tp, []byte(key), 100, producer.WithKey(key), producer.WithDelay(d))
		require.NoError(t, err)
	}
	e.send(tp, "now", "x")
	page := e.get("topic?name=jobs")
	assert.Equal(t, []string{"now"}, ids(t, page, "waiting"))
	assert.Equal(t, []string{"in1h", "in2h", "in3h"}, ids(t, page, "delayed"))
	msg := e.get("message?topic=jobs&id=in2h")
	assert.Contains(t, msg, `<span class="badge state">delayed</span>`)
	assert.Contains(t, msg, `id="remove"`)
	assert.Equal(t, "Removed 1 waiting message.", e.act(url.Values{"op": {"remove"}, "topic": {"jobs"}, "id": {"in2h"}}))
	assert.Equal(t, []string{"in1h", "in3h"}, ids(t, e.get("topic?name=jobs"), "delayed"))
}

func TestMessagePageShowsHeadersAndOptionsEscaped(t *testing.T) {
	e := newEnv(t)
	tp := e.topic("orders", topic.FixedTime, 2)
	_, err := e.prod.SendFixedTime(context.Background(), tp, []byte(`{"a":1}`), time.Now().Add(time.Hour),
		producer.WithKey("h"), producer.WithMaxRetries(3), producer.WithTimeout(90*time.Second),
		producer.WithHeaders(map[string]string{"trace-id": "abc123", "x-evil": `<script>alert(1)</script>`}))
	require.NoError(t, err)
	page := e.get("message?topic=orders&id=h")
	assert.Contains(t, page, "<th>Header <code>trace-id</code></th><td>abc123</td>")
	assert.Contains(t, page, "&lt;script&gt;alert(1)&lt;/script&gt;")
	assert.NotContains(t, page, "<script>alert")
	assert.Contains(t, page, "<th>Max retries</th><td>3</td>")
	assert.Contains(t, page, "<th>Handler timeout</th><td>1m30s</td>")
	assert.Contains(t, page, `<td id="attempts">0</td>`)
}
