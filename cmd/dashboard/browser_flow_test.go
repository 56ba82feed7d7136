package dashboard_test

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// TestBrowserFlowTree opens the message page of a flow's root in a real
// browser: it draws the tree of three levels over three topics with each
// node's state (the root and a parent waiting for their children, a leaf
// waiting, a leaf a consumer completed), each node a link to its own
// page; the page of a node below the root draws the same tree, from the
// root, with that node marked.
func TestBrowserFlowTree(t *testing.T) {
	ctx := newBrowser(t)
	e := newEnv(t)
	albums := e.topic("albums", topic.FixedTime, 2)
	resizes := e.topic("resizes", topic.Priority, 2)
	crops := e.topic("crops", topic.FixedTime, 2)
	key := func(id string) []producer.SendOption { return []producer.SendOption{producer.WithKey(id)} }
	_, err := e.prod.SendFlow(context.Background(), producer.FlowNode{Topic: albums, Body: []byte("album"), Options: key("album-1"), Children: []producer.FlowNode{
		{Topic: resizes, Body: []byte("r1"), Priority: 100, Options: key("r1")},
		{Topic: resizes, Body: []byte("r2"), Priority: 100, Options: key("r2"), Children: []producer.FlowNode{
			{Topic: crops, Body: []byte("c1"), Options: key("c1")},
		}},
	}})
	require.NoError(t, err)
	done := make(chan struct{})
	e.client(crops, func(context.Context, *consumer.Message) error { close(done); return nil })
	<-done
	e.waitFor("c1's completion reaches r2", func() bool {
		f, err := e.insp.Flow(context.Background(), resizes, "r2")
		return err == nil && len(f.Children) == 1 && f.Children[0].Node.State == rmq.StateCompleted && f.Node.State == rmq.StateWaiting
	})

	base := e.srv.URL + mount + "/"
	state := func(node string) string {
		return text(t, ctx, `#flow-tree li[data-node="`+node+`"] > .flow-state`)
	}
	step(t, ctx, chromedp.Navigate(base+"message?topic=albums&id=album-1"), chromedp.WaitVisible(chromedp.CSS(`#flow-tree`)))
	assert.Equal(t, "waiting for children", state("albums/album-1"))
	assert.Equal(t, "waiting", state("resizes/r1"))
	assert.Equal(t, "waiting", state("resizes/r2"), "released: its child finished")
	assert.Equal(t, "completed", state("crops/c1"))
	assert.Equal(t, "albums/album-1", text(t, ctx, `#flow-tree li.self > a`))

	step(t, ctx,
		chromedp.Click(chromedp.CSS(`#flow-tree li[data-node="resizes/r2"] > a`)),
		chromedp.WaitVisible(chromedp.CSS(`#flow-tree li.self[data-node="resizes/r2"]`)),
	)
	assert.Equal(t, "waiting for children", state("albums/album-1"), "a child's page draws the flow from its root")
	assert.Equal(t, "completed", state("crops/c1"))
	assert.Equal(t, "waiting", text(t, ctx, ".badge.state"))
}
