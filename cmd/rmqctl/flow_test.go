package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// flow draws a flow's tree with each node's state, and says not found
// for an unknown id.
func TestRmqctlFlow(t *testing.T) {
	e := newLifeEnv(t, "albums")
	kids := topic.MustNew("resizes", topic.Priority, 4)
	key := func(id string) []producer.SendOption { return []producer.SendOption{producer.WithKey(id)} }
	_, err := e.c.Producer().SendFlow(context.Background(), producer.FlowNode{Topic: e.tp, Body: []byte("album"), Options: key("album-7"), Children: []producer.FlowNode{
		{Topic: kids, Body: []byte("i0"), Priority: 100, Options: key("img-0")},
		{Topic: kids, Body: []byte("p"), Priority: 100, Options: key("part"), Children: []producer.FlowNode{
			{Topic: e.tp, Body: []byte("i1"), Options: key("img-1")},
		}},
	}})
	require.NoError(t, err)
	assert.Equal(t, `albums/album-7  waiting_children
├── resizes/img-0  waiting
└── resizes/part  waiting_children
    └── albums/img-1  waiting
`, e.r.ok("flow", "albums", "album-7"))
	var j flowNodeJSON
	e.r.json(&j, "flow", "albums", "album-7")
	assert.Equal(t, "waiting_children", j.State)
	require.Len(t, j.Children, 2)
	assert.Equal(t, "img-1", j.Children[1].Children[0].ID)
	nf := e.r.run("", "flow", "albums", "nope")
	assert.Equal(t, 1, nf.code)
}
