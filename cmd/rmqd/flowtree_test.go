package main

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/api"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/encode"
)

// flowChildren is GET …/job/{id}/children's answer.
type flowChildren struct {
	JobID    string          `json:"job_id"`
	State    string          `json:"state"`
	Children []api.ChildJSON `json:"children"`
}

// A flow over HTTP against a real rmqd process: POST /api/NS/flows
// answers the tree of ids; the parent is not consumable until its
// children finished (two acked, one that went dead with continue_parent);
// GET …/children shows each child's state and error; then the parent is
// consumed.
func TestBinaryFlow(t *testing.T) {
	srv := redistest.Shared(t)
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + redistest.Prefix(t)})
	tok := newTokenOn(t, p.admin, "ns")
	hdr := "X-Token: " + tok
	a := do(t, "POST", p.api+"/api/ns/flows", `{"queue":"album","key":"album-7","body":"album 7","tries":2,"children":[
		{"queue":"resize","type":"priority","priority":100,"key":"r1","body":"img 1"},
		{"queue":"resize","priority":"50","key":"r2","body_base64":"aW1nIDI="},
		{"queue":"notify","key":"n1","body":"mail","on_failure":"continue_parent"}]}`, hdr)
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	var got struct {
		Msg   string      `json:"msg"`
		JobID string      `json:"job_id"`
		Flow  api.FlowIDs `json:"flow"`
	}
	a.json(t, &got)
	assert.Equal(t, "published", got.Msg)
	assert.Equal(t, "album-7", got.JobID)
	assert.Equal(t, api.FlowIDs{Queue: "album", JobID: "album-7", Children: []api.FlowIDs{
		{Queue: "resize", JobID: "r1"}, {Queue: "resize", JobID: "r2"}, {Queue: "notify", JobID: "n1"},
	}}, got.Flow)

	children := func() flowChildren {
		t.Helper()
		a := do(t, "GET", p.api+"/api/ns/album/job/album-7/children", "", hdr)
		require.Equal(t, http.StatusOK, a.status, "%s", a)
		var c flowChildren
		a.json(t, &c)
		return c
	}
	c := children()
	assert.Equal(t, "waiting_children", c.State)
	require.Len(t, c.Children, 3)
	for _, k := range c.Children {
		assert.Equal(t, "waiting", k.State, "%+v", k)
	}
	a = do(t, "GET", p.api+"/api/ns/album", "", hdr)
	require.Equal(t, http.StatusNotFound, a.status, "the parent waits for its children: %s", a)

	consume := func(q, want string) {
		t.Helper()
		a := do(t, "GET", p.api+"/api/ns/"+q+"?ttr=30&timeout=5", "", hdr)
		require.Equal(t, http.StatusOK, a.status, "%s", a)
		var j encode.JobBody
		a.json(t, &j)
		require.Equal(t, want, j.JobID)
	}
	consume("resize", "r1") // the higher priority first
	a = do(t, "DELETE", p.api+"/api/ns/resize/job/r1", "", hdr)
	require.Equal(t, http.StatusNoContent, a.status, "%s", a)
	consume("resize", "r2")
	a = do(t, "DELETE", p.api+"/api/ns/resize/job/r2", "", hdr)
	require.Equal(t, http.StatusNoContent, a.status, "%s", a)
	consume("notify", "n1")
	a = do(t, "POST", p.api+"/api/ns/notify/job/n1/nack", "smtp down", hdr) // its one try: dead
	require.Equal(t, http.StatusNoContent, a.status, "%s", a)

	consume("album", "album-7") // released: all three finished
	c = children()
	assert.Equal(t, "in_flight", c.State)
	assert.Equal(t, []api.ChildJSON{
		{Queue: "resize", JobID: "r1", State: "completed"},
		{Queue: "resize", JobID: "r2", State: "completed"},
		{Queue: "notify", JobID: "n1", State: "dead", Error: "smtp down"},
	}, c.Children)
	a = do(t, "GET", p.api+"/api/ns/album/job/nope/children", "", hdr)
	requireError(t, a, http.StatusNotFound, "job not found")
}

// Bad trees are refused with 400 and the contract's error, and nothing
// of them is written; the route needs the namespace's token.
func TestBinaryFlowRefused(t *testing.T) {
	srv := redistest.Shared(t)
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + redistest.Prefix(t)})
	tok := newTokenOn(t, p.admin, "ns")
	other := newTokenOn(t, p.admin, "other")
	hdr := "X-Token: " + tok
	tree := `{"queue":"a","key":"root","children":[{"queue":"b","key":"kid"}]}`
	requireError(t, do(t, "POST", p.api+"/api/ns/flows", tree), http.StatusUnauthorized, "token not found")
	requireError(t, do(t, "POST", p.api+"/api/ns/flows", tree, "X-Token: "+other), http.StatusUnauthorized, "invalid token")
	for body, want := range map[string]string{
		`{"queue":"a","children":[{"queue":"b","ttl":"x"}]}`:                                   "invalid flow: node root/1: invalid ttl",
		`{"queue":"a","children":[{"queue":"b","tries":0}]}`:                                   "invalid flow: node root/1: tries shouldn't be zero",
		`{"queue":"a","children":[{"queue":"b","on_failure":"maybe"}]}`:                        "invalid flow: node root/1: invalid on_failure: fail_parent or continue_parent",
		`{"queue":"a","on_failure":"continue_parent"}`:                                         "invalid flow: node root: invalid on_failure: the root has no parent",
		`{"queue":"a","children":[{"queue":"b","body":"x","body_base64":"eA=="}]}`:             "invalid flow: node root/1: invalid body: body or body_base64, not both",
		`{"queue":"a","colour":"red"}`:                                                         "invalid flow: the body is one JSON object, the root node",
		`[{"queue":"a"}]`:                                                                      "invalid flow: the body is one JSON object, the root node",
		`{"queue":"a","children":[{"queue":"b","type":"priority"}]}`:                           "invalid priority",
		`{"queue":"a","key":"x","children":[{"queue":"b","key":"y"},{"queue":"b","key":"y"}]}`: "invalid flow: node root/2: duplicate id y in topic ns.b",
		`{"queue":"a","children":[{"queue":"m","type":"rangemerge","key":"m1"}]}`:              "invalid flow: node root/1: topic ns.m is range-merge: a flow has priority and fixed-time nodes",
	} {
		requireError(t, do(t, "POST", p.api+"/api/ns/flows", body, hdr), http.StatusBadRequest, want)
	}
	a := do(t, "POST", p.api+"/api/ns/flows", `{"queue":"a","children":[{"queue":"b","type":"priority","priority":20},{"queue":"b","type":"fixedtime"}]}`, hdr)
	requireError(t, a, http.StatusConflict, "queue has another type")
	for _, q := range []string{"a", "b", "m"} {
		a := do(t, "GET", p.api+"/api/ns/"+q+"/size", "", hdr)
		require.Equal(t, http.StatusOK, a.status, "%s", a)
		assert.Equal(t, float64(0), a.object(t)["size"], "queue %s: nothing of a refused tree is written", q)
	}
	requireError(t, do(t, "GET", p.api+"/api/ns/b/job/y", "", hdr), http.StatusNotFound, "job not found")
	// The same tree, good, is written.
	a = do(t, "POST", p.api+"/api/ns/flows", tree, hdr)
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	a = do(t, "GET", p.api+"/api/ns/b/size", "", hdr)
	assert.Equal(t, float64(1), a.object(t)["size"], "%s", a)
}
