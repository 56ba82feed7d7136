package api

// api_flows.go: flows (an RMQ extension, the library's producer.SendFlow):
// POST /api/{ns}/flows writes a tree of jobs whose parents become ready
// only once all their children finished, and GET …/job/{id}/children
// answers a job's children with their states and results. docs/rmqd.md
// documents the routes.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/params"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/pull"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/service"
)

// flowRoutes adds the flow routes to the API router.
func (s *handlers) flowRoutes(q func(pattern string, o service.RouteOpts, h service.QueueHandler)) {
	q("POST /api/{ns}/flows", service.RouteOpts{Throttle: service.ThrottleWrite}, s.publishFlow)
	q("GET /api/{ns}/{q}/job/{id}/children", service.RouteOpts{}, s.jobChildren)
}

// FlowNodeJSON is one node of a flow as POST /api/{ns}/flows takes it: a
// job of queue, with the parameters a publish takes in its query (as
// strings or numbers), its body as text or base64, and the children that
// must finish before it becomes ready.
type FlowNodeJSON struct {
	Queue      string  `json:"queue"`
	Body       *string `json:"body,omitempty"`
	BodyBase64 []byte  `json:"body_base64,omitempty"`
	Key        string  `json:"key,omitempty"`
	Type       string  `json:"type,omitempty"`
	Priority   numText `json:"priority,omitempty"`
	Delay      numText `json:"delay,omitempty"`
	DelayMs    numText `json:"delay_ms,omitempty"`
	At         string  `json:"at,omitempty"`
	TTL        numText `json:"ttl,omitempty"`
	Tries      numText `json:"tries,omitempty"`
	// OnFailure is what this child's failure (dead, cancelled, deleted,
	// expired) does to its parent: "fail_parent" (the default) sends the
	// parent to the dead letter, "continue_parent" lets it run.
	OnFailure string         `json:"on_failure,omitempty"`
	Children  []FlowNodeJSON `json:"children,omitempty"`
}

// numText is a number parameter of a node, given as a JSON number or
// string: its text, checked as a publish's query parameter is (so
// "ttl":"x" is "invalid ttl", as ?ttl=x is).
type numText string

func (n *numText) UnmarshalJSON(b []byte) error {
	var s string
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*n = numText(s)
		return nil
	}
	*n = numText(b)
	return nil
}

// String is the text ("" when absent).
func (n numText) String() string { return string(n) }

// FlowIDs is the answer's tree of ids, mirroring the request's.
type FlowIDs struct {
	Queue    string    `json:"queue"`
	JobID    string    `json:"job_id"`
	Children []FlowIDs `json:"children,omitempty"`
}

// flowNode is a node checked: its parameters, body and children.
type flowNode struct {
	queue string
	p     publishParams
	body  []byte
	fail  producer.FlowFailure
	kids  []flowNode
}

// query is the node's parameters as a publish's query.
func (n *FlowNodeJSON) query() url.Values {
	q := url.Values{}
	for _, kv := range [][2]string{{"type", n.Type}, {"priority", n.Priority.String()}, {"delay", n.Delay.String()},
		{"delay_ms", n.DelayMs.String()}, {"at", n.At}, {"ttl", n.TTL.String()}, {"tries", n.Tries.String()}, {"key", n.Key}} {
		if kv[1] != "" {
			q.Set(kv[0], kv[1])
		}
	}
	return q
}

// check checks n (at path, under a parent unless root) and its subtree;
// status and text are the error answer (0: none).
func (n *FlowNodeJSON) check(ns, path string, root bool) (fn flowNode, status int, text string) {
	bad := func(s string) (flowNode, int, string) {
		return flowNode{}, http.StatusBadRequest, fmt.Sprintf("invalid flow: node %s: %s", path, s)
	}
	if msg := names.NameErr(ns, n.Queue); msg != "" {
		return bad(msg)
	}
	p, msg := parseParams(n.query())
	if msg != "" {
		return bad(msg)
	}
	fn = flowNode{queue: n.Queue, p: p}
	switch {
	case n.Body != nil && n.BodyBase64 != nil:
		return bad("invalid body: body or body_base64, not both")
	case n.Body != nil:
		fn.body = []byte(*n.Body)
	default:
		fn.body = n.BodyBase64
	}
	if len(fn.body) > params.MaxJobSize {
		return flowNode{}, http.StatusRequestEntityTooLarge, fmt.Sprintf("invalid flow: node %s: job too large", path)
	}
	switch n.OnFailure {
	case "", "fail_parent":
	case "continue_parent":
		fn.fail = producer.ContinueParent
	default:
		return bad("invalid on_failure: fail_parent or continue_parent")
	}
	if root && n.OnFailure != "" {
		return bad("invalid on_failure: the root has no parent")
	}
	for i := range n.Children {
		k, status, text := n.Children[i].check(ns, fmt.Sprintf("%s/%d", path, i+1), false)
		if status != 0 {
			return flowNode{}, status, text
		}
		fn.kids = append(fn.kids, k)
	}
	return fn, 0, ""
}

// queues lists the queues of n's tree, each once, with the type a node
// names (0: none); two nodes naming two types of one queue conflict.
func (n *flowNode) queues(order *[]string, types map[string]topic.Type) error {
	want, seen := types[n.queue]
	if !seen {
		*order = append(*order, n.queue)
	}
	switch {
	case n.p.typ != 0 && want != 0 && want != n.p.typ:
		return pull.ErrTypeConflict
	case n.p.typ != 0 || !seen:
		types[n.queue] = n.p.typ
	}
	for i := range n.kids {
		if err := n.kids[i].queues(order, types); err != nil {
			return err
		}
	}
	return nil
}

// build makes the library's flow node of n and the answer's ids; bad is
// the 400 text of a node whose queue's type does not fit it.
func (n *flowNode) build(topics map[string]topic.Topic) (producer.FlowNode, FlowIDs, string) {
	t := topics[n.queue]
	if bad := n.p.checkType(t); bad != "" {
		return producer.FlowNode{}, FlowIDs{}, bad
	}
	j := n.p.spec(n.body, t.Type())
	fn := j.FlowNode(t)
	fn.OnFailure = n.fail
	ids := FlowIDs{Queue: n.queue, JobID: j.ID}
	for i := range n.kids {
		k, kid, bad := n.kids[i].build(topics)
		if bad != "" {
			return producer.FlowNode{}, FlowIDs{}, bad
		}
		fn.Children = append(fn.Children, k)
		ids.Children = append(ids.Children, kid)
	}
	return fn, ids, ""
}

// publishFlow is POST /api/{ns}/flows: the body is the flow's root node
// (FlowNodeJSON); every node is checked before anything is written, and
// the library writes the whole tree or nothing. 201 with the root's id
// and the tree of ids.
func (s *handlers) publishFlow(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	// The body counts against the bulk bodies in progress, as a bulk
	// publish's does.
	raw, release, ok := s.readBulkBody(w, r)
	if !ok {
		return
	}
	defer release()
	var req FlowNodeJSON
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || dec.More() {
		respond.WriteError(w, http.StatusBadRequest, "invalid flow: the body is one JSON object, the root node")
		return
	}
	root, status, text := req.check(qr.Ns, "root", true)
	if status != 0 {
		respond.WriteError(w, status, text)
		return
	}
	var order []string
	types := map[string]topic.Type{}
	if err := root.queues(&order, types); err != nil {
		s.LibError(w, r, err)
		return
	}
	topics := make(map[string]topic.Topic, len(order))
	for _, q := range order {
		var err error
		if topics[q], err = qr.Pool.PublishTopic(r.Context(), qr.Ns, q, types[q]); err != nil {
			s.LibError(w, r, err)
			return
		}
	}
	tree, ids, bad := root.build(topics)
	if bad != "" {
		respond.WriteError(w, http.StatusBadRequest, bad)
		return
	}
	// The token's queue quota counts every queue of the tree, as a
	// publish to each would.
	for _, q := range order {
		each := *qr
		each.Q = q
		if !s.queueAllowed(w, r, &each) {
			return
		}
	}
	if _, err := qr.Pool.SendFlow(r.Context(), tree); err != nil {
		if errors.Is(err, producer.ErrInvalidFlow) {
			respond.WriteError(w, http.StatusBadRequest, strings.TrimPrefix(err.Error(), "rmq: "))
			return
		}
		s.LibError(w, r, err)
		return
	}
	for _, q := range order {
		qr.Pool.Defined(topics[q])
	}
	s.Metrics.Published.Add(uint64(countIDs(ids)))
	respond.WriteJSON(w, http.StatusCreated, struct {
		Msg   string  `json:"msg"`
		JobID string  `json:"job_id"`
		Flow  FlowIDs `json:"flow"`
	}{"published", ids.JobID, ids})
}

func countIDs(f FlowIDs) int {
	n := 1
	for _, c := range f.Children {
		n += countIDs(c)
	}
	return n
}

// ChildJSON is one child of a job as GET …/job/{id}/children answers it.
// result is standard base64, as a job's is.
type ChildJSON struct {
	Queue    string `json:"queue"` // the queue in the namespace; else the library's topic name
	JobID    string `json:"job_id"`
	State    string `json:"state"`
	Result   []byte `json:"result,omitempty"`
	Error    string `json:"error,omitempty"`
	Children int    `json:"children,omitempty"` // its own children (a parent)
}

// jobChildren is GET /api/{ns}/{q}/job/{id}/children: the job's state and
// its children's (rmq.Inspector.Flow), each with its result and error. A
// job that is no parent has none; an unknown one is 404.
func (s *handlers) jobChildren(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	t, found, err := qr.Pool.QueueTopic(r.Context(), qr.Ns, qr.Q)
	if err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	if !found {
		respond.WriteError(w, http.StatusNotFound, "job not found")
		return
	}
	f, err := qr.Pool.Flow(r.Context(), t, qr.ID)
	switch {
	case errors.Is(err, rmq.ErrMessageNotFound):
		respond.WriteError(w, http.StatusNotFound, "job not found")
		return
	case err != nil:
		s.LibError(w, r, err)
		return
	}
	kids := make([]ChildJSON, len(f.Children))
	for i, c := range f.Children {
		q := c.Node.Topic.Name()
		if ns, name, ok := names.SplitTopicName(q); ok && ns == qr.Ns {
			q = name
		}
		kids[i] = ChildJSON{Queue: q, JobID: c.Node.ID, State: string(c.Node.State), Result: c.Node.Result,
			Error: c.Node.LastError, Children: len(c.Children)}
	}
	respond.WriteJSON(w, http.StatusOK, struct {
		JobID    string      `json:"job_id"`
		State    string      `json:"state"`
		Children []ChildJSON `json:"children"`
	}{qr.ID, string(f.Node.State), kids})
}
