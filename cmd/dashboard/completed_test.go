package dashboard_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ackmux "github.com/rmq-go/rmq/internal/engine/ack"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// complete sends id to a fixed-time topic and finishes it with result the
// way a consumer does (fetch.lua, then the ack rounds with the slot's life
// keys), under the lifecycle l stored for the topic.
func (e *env) complete(tp topic.Topic, l rmq.Lifecycle, id, result string) {
	e.t.Helper()
	ctx := context.Background()
	// Due a second ago: a message due in the fetch's own ms is held for it.
	_, err := e.prod.SendFixedTime(ctx, tp, []byte("body-"+id), time.Now().Add(-time.Second), producer.WithKey(id))
	require.NoError(e.t, err)
	slot := slots.IndexString(id, tp.SlotAmount())
	k := keyspace.KeysFor(e.prefix, tp, slot)
	keys, args := scripts.FetchCall{TimeBased: true, N: 1, LeaseSec: 30, Window: 65,
		Groups: []scripts.FetchGroup{{Store: k.Store, Prepare: k.Prepare, Msg: k.Msg, Max: 1}}}.Args()
	vals, err := scripts.Fetch.Run(ctx, e.rdb, keys, args...).Slice()
	require.NoError(e.t, err)
	r, err := scripts.ParseFetchReply(vals)
	require.NoError(e.t, err)
	require.Len(e.t, r.Msgs, 1)
	require.Equal(e.t, id, r.Msgs[0].ID)
	req := &ackmux.Req{Keys: ackmux.SlotKeys(k, true), ID: id, Token: r.Msgs[0].Token, Bound: 5 * time.Second,
		Life: keyspace.LifeKeysFor(e.prefix, tp.Name(), slot).Slice(), HasLife: true,
		Retention: l.Retention.Milliseconds(), Events: int64(l.Events), Result: []byte(result)}
	require.NoError(e.t, ackmux.New(e.rdb, nil).Do(ctx, req))
	require.Equal(e.t, int64(ackmux.Done), req.Code, "ack of %s", id)
}

// A completed message of a retaining topic: its page shows it completed,
// when, its result (escaped) and its completed event, and offers no
// action; the finished listing shows the start of its result.
func TestCompletedMessagePage(t *testing.T) {
	e := newEnv(t)
	tp := e.topic("renders", topic.FixedTime, 4)
	l := rmq.Lifecycle{Retention: time.Hour, Events: 100}
	e.setLife(tp, l)
	e.complete(tp, l, "r-1", `{"url":"<b>done</b>"}`)
	page := e.get("message?topic=renders&id=r-1")
	assert.Contains(t, page, `<span class="badge state">completed</span>`)
	assert.Contains(t, page, `id="finished"`)
	assert.Contains(t, page, `<pre class="body" id="result">{&#34;url&#34;:&#34;&lt;b&gt;done&lt;/b&gt;&#34;}</pre>`)
	assert.Contains(t, page, `<span class="badge ev-completed">completed</span>`)
	assert.NotContains(t, page, `id="cancel"`)
	assert.NotContains(t, page, `id="remove"`)
	assert.Equal(t, []string{"r-1"}, ids(t, e.get("finished?topic=renders"), "finished"))
	assert.Contains(t, e.get("finished?topic=renders"), `<code>{&#34;url&#34;:&#34;&lt;b&gt;done&lt;/b&gt;&#34;}</code>`)
}
