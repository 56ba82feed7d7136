package rmq_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// AllStats gives one Stats per stored topic, with each topic's own counts.
func TestInspectorAllStats(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := ctxT(t)
	c := e.client()
	ft := mustTopic(t, "ft", topic.FixedTime, 2)
	pr := mustTopic(t, "pr", topic.Priority, 2)
	p := c.Producer()
	for i, id := range []string{"a", "b", "c"} {
		_, err := p.SendFixedTime(ctx, ft, []byte(id), time.Now().Add(time.Hour+time.Duration(i)), producer.WithKey(id))
		require.NoError(t, err)
	}
	_, err := p.SendPriority(ctx, pr, []byte("x"), 50, producer.WithKey("x"), producer.WithDelay(time.Hour))
	require.NoError(t, err)

	all, err := c.Inspector().AllStats(ctx)
	require.NoError(t, err)
	require.Len(t, all, 2)
	byName := map[string]int64{}
	delayed := map[string]int64{}
	for _, st := range all {
		byName[st.Topic.Name()] = st.Store
		delayed[st.Topic.Name()] = st.Delayed
	}
	assert.Equal(t, map[string]int64{"ft": 3, "pr": 0}, byName)
	assert.Equal(t, map[string]int64{"ft": 0, "pr": 1}, delayed)
}
