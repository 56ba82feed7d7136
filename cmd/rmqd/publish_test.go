package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/topic"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/encode"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/params"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/pull"
)

func TestPublishChecksInOrder(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	pub := func(query, body string, headers ...string) answer {
		return do(t, "PUT", e.url("/api/ns/q"+query), body, append(headers, "X-Token: "+tok)...)
	}
	for _, c := range []struct{ query, text string }{
		{"?delay=-1", "invalid delay"},
		{"?delay=", "invalid delay"},
		{"?delay=1.5", "invalid delay"},
		{"?delay=4294967296", "invalid delay"},
		{"?delay=x&ttl=x&tries=0", "invalid delay"},
		{"?ttl=-1", "invalid ttl"},
		{"?ttl=x&tries=0", "invalid ttl"},
		{"?delay=10&ttl=5", "ttl is shorter than delay"},
		{"?delay=10&ttl=5&tries=x", "ttl is shorter than delay"},
		{"?tries=-1", "invalid tries"},
		{"?tries=65536", "invalid tries"},
		{"?tries=0", "tries shouldn't be zero"},
		{"?delay=1&delay_ms=5", "invalid delay"},
		{"?at=tomorrow", "invalid at"},
		{"?type=fifo", "invalid type"},
		{"?priority=16", "invalid priority"},
		{"?key=a/b", "invalid key"},
	} {
		requireError(t, pub(c.query, "x"), http.StatusBadRequest, c.text)
	}
	// ttl 0 never expires, so any delay goes.
	e.publish(tok, "ns", "q", "?delay=10&ttl=0&tries=65535", "x")

	// The body limit is 1 MiB inclusive, and comes after the query checks.
	requireError(t, pub("?tries=0", strings.Repeat("a", params.MaxJobSize+1)), http.StatusBadRequest, "tries shouldn't be zero")
	requireError(t, pub("", strings.Repeat("a", params.MaxJobSize+1)), http.StatusRequestEntityTooLarge, "body too large")
	e.publish(tok, "ns", "q", "", strings.Repeat("a", params.MaxJobSize))

	// Attributes only count with Enable-Job-Version.
	var attrs []string
	for i := range 17 {
		attrs = append(attrs, fmt.Sprintf("Job-Attr-A%d: v", i))
	}
	requireError(t, pub("", "x", append(attrs, "Enable-Job-Version: yes")...), http.StatusBadRequest, "too many attributes, cannot exceed 16")
	e.publish(tok, "ns", "q", "", "x", attrs...)
	// The refused requests stored nothing: 3 jobs, one of them delayed.
	require.Equal(t, 2, e.size("ns", "q"))
}

func TestPublishAnswersDistinctJobIDs(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	a := e.publish(tok, "ns", "q", "", "same")
	b := e.publish(tok, "ns", "q", "", "same")
	require.Len(t, a, 26)
	require.NotEqual(t, a, b, "identical bodies are two jobs")
	require.Equal(t, 2, e.size("ns", "q"))
	// Version mode: "1" + ULID.
	v := e.publish(tok, "ns", "q", "", "x", "Enable-Job-Version: YES")
	require.Len(t, v, 27)
	require.True(t, strings.HasPrefix(v, "1"), v)
	// FIFO: the head is the first published.
	var head encode.JobBody
	peek := do(t, "GET", e.url("/api/ns/q/peek"), "", "X-Token: "+tok)
	require.Equal(t, http.StatusOK, peek.status, "%s", peek)
	peek.json(t, &head)
	require.Equal(t, a, head.JobID)
	require.Equal(t, "same", string(head.Data))
	require.Equal(t, "ns", head.Namespace)
	require.Equal(t, "q", head.Queue)
}

func TestPublishDelayHidesTheJob(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	e.publish(tok, "ns", "q", "?delay_ms=400", "later")
	require.Equal(t, 0, e.size("ns", "q"))
	requireError(t, do(t, "GET", e.url("/api/ns/q/peek"), "", "X-Token: "+tok), http.StatusNotFound, "the queue is empty")
	require.Eventually(t, func() bool { return e.size("ns", "q") == 1 }, waitLong, 20*time.Millisecond)

	at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
	e.publish(tok, "ns", "q2", "?at="+at, "in an hour")
	require.Equal(t, 0, e.size("ns", "q2"))
	e.publish(tok, "ns", "q2", "?at="+time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano), "overdue")
	require.Equal(t, 1, e.size("ns", "q2"))
}

func TestBulkPublish(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	bulk := func(query, body string, headers ...string) answer {
		return do(t, "PUT", e.url("/api/ns/q/bulk"+query), body, append(headers, "X-Token: "+tok)...)
	}
	requireError(t, bulk("?tries=0", "[1]"), http.StatusBadRequest, "tries shouldn't be zero")
	requireError(t, bulk("?key=k", "[1,2]"), http.StatusBadRequest, "invalid key")
	for _, body := range []string{`{"a":1}`, `"x"`, `null`, `[1,`, ``} {
		requireError(t, bulk("", body), http.StatusBadRequest, "request body should be an array of objects")
	}
	requireError(t, bulk("", "[]"), http.StatusBadRequest, "no jobs")
	requireError(t, bulk("", "["+strings.Repeat("1,", 64)+"1]"), http.StatusBadRequest, "too many jobs")
	big := `"` + strings.Repeat("a", params.MaxJobSize-1) + `"` // 1 MiB + 1 with its quotes
	requireError(t, bulk("", "[1,"+big+"]"), http.StatusRequestEntityTooLarge, "job too large")
	require.Equal(t, 0, e.size("ns", "q"), "refused bulks store nothing")

	a := bulk("", ` ["two", {"a": 1}, 5, null]`)
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	var out struct {
		Msg    string   `json:"msg"`
		JobIDs []string `json:"job_ids"`
	}
	a.json(t, &out)
	require.Equal(t, "published", out.Msg)
	require.Len(t, out.JobIDs, 4)
	require.Equal(t, 4, e.size("ns", "q"))
	// Each element's raw JSON text is a body, in array order.
	p := e.svc.Pools[names.DefaultPool]
	ws, err := p.ReadyIDs(context.Background(), mustQueueTopic(t, p, "ns", "q"), 10)
	require.NoError(t, err)
	var got []string
	for i, w := range ws {
		require.Equal(t, out.JobIDs[i], w.ID)
		got = append(got, string(w.Body))
	}
	require.Equal(t, []string{`"two"`, `{"a": 1}`, `5`, `null`}, got)
}

func mustQueueTopic(t *testing.T, p *pull.Pool, ns, q string) topic.Topic {
	t.Helper()
	tp, found, err := p.QueueTopic(context.Background(), ns, q)
	require.NoError(t, err)
	require.True(t, found, "queue %s/%s", ns, q)
	return tp
}

// The RMQ types over HTTP: a queue's type is chosen by its first publish.
func TestQueueTypes(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	for _, prio := range []string{"100", "300", "200"} {
		e.publish(tok, "ns", "jobs", "?type=priority&priority="+prio, "p"+prio)
	}
	requireError(t, do(t, "PUT", e.url("/api/ns/jobs"), "x", "X-Token: "+tok), http.StatusBadRequest, "invalid priority")
	requireError(t, do(t, "PUT", e.url("/api/ns/jobs?type=fixedtime"), "x", "X-Token: "+tok), http.StatusConflict, "queue has another type")
	requireError(t, do(t, "PUT", e.url("/api/ns/q?priority=20"), "x", "X-Token: "+tok), http.StatusBadRequest, "invalid priority")
	var head encode.JobBody
	do(t, "GET", e.url("/api/ns/jobs/peek"), "", "X-Token: "+tok).json(t, &head)
	require.Equal(t, "p300", string(head.Data), "highest priority first")
	require.Equal(t, 3, e.size("ns", "jobs"))

	// Range-merge with a key: repeats within the window are one job.
	id1 := e.publish(tok, "ns", "prices", "?type=rangemerge&delay_ms=300&key=sku-1", "12.5")
	id2 := e.publish(tok, "ns", "prices", "?key=sku-1&delay_ms=300", "12.7")
	require.Equal(t, "sku-1", id1)
	require.Equal(t, id1, id2)
	require.Eventually(t, func() bool { return e.size("ns", "prices") == 1 }, waitLong, 20*time.Millisecond)
	do(t, "GET", e.url("/api/ns/prices/peek"), "", "X-Token: "+tok).json(t, &head)
	require.Equal(t, "12.7", string(head.Data), "the latest body wins")

	// Fixed time with a key: a repeat replaces the time.
	e.publish(tok, "ns", "orders", "?key=o-1&delay=3600", "x")
	require.Equal(t, 0, e.size("ns", "orders"))
	e.publish(tok, "ns", "orders", "?key=o-1", "x")
	require.Equal(t, 1, e.size("ns", "orders"))

	qs := map[string][]string{}
	a := do(t, "GET", e.admin.URL+"/info", "")
	require.Equal(t, http.StatusOK, a.status)
	require.NoError(t, json.Unmarshal(a.body, &qs))
	require.Equal(t, map[string][]string{"ns": {"jobs", "orders", "prices"}}, qs)
}
