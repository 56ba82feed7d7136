package producer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/rmq-go/rmq/internal/flowtree"
	"github.com/rmq-go/rmq/internal/options"
	"github.com/rmq-go/rmq/topic"
)

// FlowNode is one node of a flow (SendFlow): a message, and the children
// that must all finish before it becomes deliverable.
type FlowNode struct {
	Topic topic.Topic
	Body  []byte
	// Options are the node's send options: WithKey, WithSlotBasis,
	// WithHeaders, WithMaxRetries, WithTTL/WithExpiresAt, WithTimeout,
	// WithDelay/WithNotBefore (priority topics), WithGroup. A node with a
	// group waits in its group's queue as a grouped send does (the group
	// picks its slot; its group's limits hold it): a leaf at once, a parent
	// once its children finished. WithUniqueFor is refused in a flow
	// (ErrInvalidFlow).
	Options  []SendOption
	Priority int64     // Priority topics
	DueAt    time.Time // FixedTime topics (zero: now); RangeMerge topics are refused in a flow
	Children []FlowNode
	// FailParent (the default) sends the parent to the dead queue when this
	// child goes dead or is cancelled or removed; ContinueParent lets the
	// parent run and see the failure.
	OnFailure FlowFailure
}

// FlowFailure says what a child's failure does to its parent.
type FlowFailure int

const (
	// FailParent sends the parent to its dead queue, with a last error
	// naming the child, when the child goes dead, is cancelled or is
	// removed (expired included); the parent's own parent sees it dead.
	FailParent FlowFailure = iota
	// ContinueParent lets the parent run once all its children finished,
	// whatever their outcome; consumer.Message.Children tells it.
	ContinueParent
)

// Limits of a flow.
const (
	MaxFlowChildren = 10_000 // children of one parent
	MaxFlowDepth    = 32     // levels below the root
)

// ErrInvalidFlow is returned by SendFlow for a tree it refuses: a
// RangeMerge node, a duplicate id (one topic, one id, twice), an id taken
// by a message that waits or runs, an invalid node (its send would be
// refused), more than MaxFlowChildren children under one parent, or a
// depth over MaxFlowDepth. Nothing of the tree is written.
var ErrInvalidFlow = errors.New("rmq: invalid flow")

// SendFlow sends a tree of messages: each parent becomes deliverable, at
// its own due time or priority, only once every one of its children
// finished, and its listener reads their outcomes and results with
// consumer.Message.Children. Leaves are deliverable at once (or at their
// time). The whole tree is written or nothing: nodes in many slots and
// topics are staged invisibly first and made live after the root's slot
// commits the flow (docs/flows.md). A parent is released exactly once,
// never before its last child finished, whatever process or Redis dies.
// It returns the root's id.
func (p *Producer) SendFlow(ctx context.Context, root FlowNode) (string, error) {
	var nodes []flowtree.Node
	seen := map[string]bool{}
	if _, err := p.flowNode(&root, "", 0, seen, &nodes, ""); err != nil {
		return "", err
	}
	if len(nodes) == 1 {
		// No children: an ordinary send.
		id, err := p.sendLeaf(ctx, root)
		if err == nil {
			p.flowSent(root.Topic, 1)
		}
		return id, err
	}
	defined := map[string]bool{}
	if err := p.defineFlow(ctx, root, defined); err != nil {
		return "", err
	}
	if err := flowtree.Write(ctx, p.rdb, p.prefix, nodes); err != nil {
		if errors.Is(err, flowtree.ErrTaken) {
			return "", fmt.Errorf("%w: %w", ErrInvalidFlow, err)
		}
		return "", err
	}
	p.flowSent(root.Topic, len(nodes))
	return nodes[0].ID, nil
}

// flowSent tells the client's notifier that a flow was written.
func (p *Producer) flowSent(root topic.Topic, nodes int) {
	if n, ok := p.notify.(options.FlowNotifier); ok {
		n.FlowSent(root, nodes)
	}
}

func (p *Producer) sendLeaf(ctx context.Context, n FlowNode) (string, error) {
	if n.Topic.Type() == topic.Priority {
		return p.SendPriority(ctx, n.Topic, n.Body, n.Priority, n.Options...)
	}
	at := n.DueAt
	if at.IsZero() {
		at = time.Now()
	}
	return p.SendFixedTime(ctx, n.Topic, n.Body, at, n.Options...)
}

// defineFlow defines the topics of the tree under n and marks those with
// a grouped node grouped (markGrouped), before anything of it is written.
func (p *Producer) defineFlow(ctx context.Context, n FlowNode, done map[string]bool) error {
	if !done[n.Topic.Name()] {
		done[n.Topic.Name()] = true
		if err := p.define(ctx, n.Topic); err != nil {
			return err
		}
	}
	// Validated by flowNode already.
	if sc, _ := sendOptions(n.Options, n.Topic.Type()); sc.hasGroup {
		if err := p.markGrouped(ctx, n.Topic); err != nil {
			return err
		}
	}
	for _, c := range n.Children {
		if err := p.defineFlow(ctx, c, done); err != nil {
			return err
		}
	}
	return nil
}

// flowNode validates n (at depth, under the parent ref up) and appends it
// and its subtree to nodes, parents before their children; it returns
// n's descriptor for its parent's record.
func (p *Producer) flowNode(n *FlowNode, up string, depth int, seen map[string]bool, nodes *[]flowtree.Node, path string) (flowtree.Node, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: node %s: %s", ErrInvalidFlow, pathName(path), fmt.Sprintf(format, a...))
	}
	if depth > MaxFlowDepth {
		return flowtree.Node{}, bad("deeper than %d levels", MaxFlowDepth)
	}
	if len(n.Children) > MaxFlowChildren {
		return flowtree.Node{}, bad("%d children (at most %d)", len(n.Children), MaxFlowChildren)
	}
	if n.Topic.IsZero() {
		return flowtree.Node{}, bad("zero Topic")
	}
	typ := n.Topic.Type()
	var score float64
	var err error
	switch typ {
	case topic.RangeMerge:
		return flowtree.Node{}, bad("topic %s is range-merge: a flow has priority and fixed-time nodes", n.Topic.Name())
	case topic.Priority:
		score, err = priorityScore(n.Priority)
	default:
		if !n.DueAt.IsZero() {
			score, err = fixedScore(n.DueAt)
		}
	}
	if err != nil {
		return flowtree.Node{}, fmt.Errorf("%w: node %s: %w", ErrInvalidFlow, pathName(path), err)
	}
	sc, err := sendOptions(n.Options, typ)
	if err != nil {
		return flowtree.Node{}, fmt.Errorf("%w: node %s: %w", ErrInvalidFlow, pathName(path), err)
	}
	if sc.hasUnique {
		return flowtree.Node{}, bad("WithUniqueFor is not for flows")
	}
	if _, ok := sc.job.headers[flowtree.Header]; ok {
		return flowtree.Node{}, bad("header %s is the flow's own", flowtree.Header)
	}
	it, err := p.item(n.Topic, n.Body, score, sc)
	if err != nil {
		return flowtree.Node{}, fmt.Errorf("%w: node %s: %w", ErrInvalidFlow, pathName(path), err)
	}
	name := n.Topic.Name() + "\x00" + it.id
	if seen[name] {
		return flowtree.Node{}, bad("duplicate id %s in topic %s", it.id, n.Topic.Name())
	}
	seen[name] = true
	job := it.job
	if up != "" {
		if len(up) > MaxHeaderValueLength {
			return flowtree.Node{}, bad("its parent's topic name and id are too long (%d bytes, at most %d)", len(up), MaxHeaderValueLength)
		}
		h := maps.Clone(job.headers)
		if h == nil {
			h = map[string]string{}
		}
		h[flowtree.Header] = up
		job.headers = h
	}
	opts, err := job.options(time.Now())
	if err != nil {
		return flowtree.Node{}, fmt.Errorf("%w: node %s: %w", ErrInvalidFlow, pathName(path), err)
	}
	fn := flowtree.Node{Topic: n.Topic.Name(), Slot: it.slot, ID: it.id, Type: int(typ), Score: it.scoreText(), Opts: opts, Body: n.Body, Up: up}
	at := len(*nodes)
	*nodes = append(*nodes, fn)
	kids := make([]string, 0, len(n.Children))
	for i := range n.Children {
		c := &n.Children[i]
		ref := flowtree.Ref{Fail: c.OnFailure != ContinueParent, Slot: it.slot, Index: i + 1, Topic: n.Topic.Name(), ID: it.id}
		cn, err := p.flowNode(c, ref.String(), depth+1, seen, nodes, fmt.Sprintf("%s/%d", path, i+1))
		if err != nil {
			return flowtree.Node{}, err
		}
		kids = append(kids, flowtree.Kid(ref.Fail, cn.Topic, cn.Slot, cn.ID))
	}
	(*nodes)[at].Kids = kids
	return fn, nil
}

func pathName(path string) string {
	if path == "" {
		return "root"
	}
	return "root" + path
}
