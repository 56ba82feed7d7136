package main

import (
	"context"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/brokerserver"
	"github.com/rmq-go/rmq/internal/testkit/brokerserver/brokertest"
	"github.com/rmq-go/rmq/internal/testkit/redistest"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/api"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/forward"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/service"
)

// arrival is one message a broker handed to the test's subscriber.
type arrival struct {
	at      time.Time
	id      string // the broker's deduplication id
	body    string
	headers map[string]string
}

// arrivals collects what a subscriber receives.
type arrivals struct {
	mu  sync.Mutex
	got []arrival
	ch  chan struct{} // a signal per arrival
}

func newArrivals() *arrivals { return &arrivals{ch: make(chan struct{}, 1024)} }

func (a *arrivals) add(x arrival) {
	a.mu.Lock()
	a.got = append(a.got, x)
	a.mu.Unlock()
	a.ch <- struct{}{}
}

// wait returns the first n arrivals once they came, failing the test after
// waitLong.
func (a *arrivals) wait(t *testing.T, n int) []arrival {
	t.Helper()
	timeout := time.After(waitLong)
	for {
		a.mu.Lock()
		got := append([]arrival(nil), a.got...)
		a.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-a.ch:
		case <-timeout:
			t.Fatalf("%d of %d messages arrived within %v", len(got), n, waitLong)
		}
	}
}

// byBody indexes arrivals by body.
func byBody(xs []arrival) map[string]arrival {
	m := map[string]arrival{}
	for _, x := range xs {
		m[x.body] = x
	}
	return m
}

// forwardEnv is an rmqd binary with forwards, and a token of namespace shop.
type forwardEnv struct {
	*rmqdProc
	tok string
}

func startForwarding(t *testing.T, forwards ...string) *forwardEnv {
	t.Helper()
	var args []string
	for _, f := range forwards {
		args = append(args, "--forward", f)
	}
	srv := redistest.Shared(t)
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + redistest.Prefix(t)}, args...)
	a := do(t, "POST", p.admin+"/token/shop?description=fw", "")
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	var tok map[string]string
	a.json(t, &tok)
	return &forwardEnv{rmqdProc: p, tok: tok["token"]}
}

// publish publishes body to shop/q with the query and returns the job id.
func (e *forwardEnv) publish(t *testing.T, q, query, body string, headers ...string) string {
	t.Helper()
	a := do(t, "PUT", e.api+"/api/shop/"+q+query, body, append(headers, "X-Token: "+e.tok)...)
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	return a.object(t)["job_id"].(string)
}

// startFails runs rmqd with the forwards, expects it to exit 1 at start
// and returns its output.
func startFails(t *testing.T, forwards ...string) string {
	t.Helper()
	args := []string{"--redis-url", "redis://" + redistest.Shared(t).Addr() + "/0", "--prefix", redistest.Prefix(t),
		"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}
	for _, f := range forwards {
		args = append(args, "--forward", f)
	}
	out, err := exec.Command(rmqdBinary(t), args...).CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	require.Equal(t, 1, exit.ExitCode(), "%s", out)
	return string(out)
}

// forwards reads GET /forwards.
func (e *forwardEnv) forwards(t *testing.T) map[string]forward.Status {
	t.Helper()
	a := do(t, "GET", e.admin+"/forwards", "")
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	var list []forward.Status
	a.json(t, &list)
	m := map[string]forward.Status{}
	for _, f := range list {
		m[f.Pool+":"+f.Namespace+"/"+f.Queue] = f
	}
	return m
}

// checkTiming asserts that a job published between before and after with
// the given delay arrived at its due time: never early, and late by no
// more than a generous bound (the machine is shared).
func checkTiming(t *testing.T, x arrival, before, after time.Time, delay time.Duration) {
	t.Helper()
	require.False(t, x.at.Before(before.Add(delay)), "arrived %v before its due time", before.Add(delay).Sub(x.at))
	require.Less(t, x.at.Sub(after.Add(delay)), 3*time.Second, "arrived late")
}

// The seed's service end to end: jobs published over HTTP with a delay or
// an absolute time arrive in JetStream at that time, with the job id as
// Nats-Msg-Id, the body byte for byte and the attributes as headers; the
// forwarded queue is not consumable over HTTP; a subject no stream
// captures stops the start, and once started its jobs fail into the dead
// letter with the broker's error shown by GET /forwards.
func TestBinaryForwardNATS(t *testing.T) {
	srv := brokertest.NATS(t)
	nc, err := nats.Connect(srv.URL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "FW", Subjects: []string{"fw.>"}, Duplicates: 2 * time.Minute})
	require.NoError(t, err)
	got := newArrivals()
	sub, err := nc.Subscribe("fw.orders", func(m *nats.Msg) {
		h := map[string]string{}
		for k := range m.Header {
			h[k] = m.Header.Get(k)
		}
		got.add(arrival{at: time.Now(), id: m.Header.Get(jetstream.MsgIDHeader), body: string(m.Data), headers: h})
	})
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	t.Cleanup(func() { _ = sub.Unsubscribe() })

	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "LOST", Subjects: []string{"lost.x"}})
	require.NoError(t, err)

	// No stream for the subject, or no server: rmqd does not start.
	out := startFails(t, "shop/orders=nats://"+srv.Addr()+"/nostream.x")
	require.Contains(t, out, `forward shop/orders to nats://`+srv.Addr()+`/nostream.x: no JetStream stream captures subject \"nostream.x\"`)
	out = startFails(t, "shop/orders=nats://127.0.0.1:1/fw.orders")
	require.Contains(t, out, "forward shop/orders to nats://127.0.0.1:1/fw.orders: nats: no servers available for connection")

	e := startForwarding(t, "shop/orders=nats://"+srv.Addr()+"/fw.orders", "shop/lost=nats://"+srv.Addr()+"/lost.x")
	st := e.forwards(t)
	require.Len(t, st, 2)
	require.Equal(t, forward.Status{Pool: "default", Namespace: "shop", Queue: "orders", Target: "nats://" + srv.Addr() + "/fw.orders"}, st["default:shop/orders"])
	// Forwarded queues exist from the start, and /info keeps lmstfy's shape.
	info := do(t, "GET", e.admin+"/info", "")
	require.JSONEq(t, `{"shop":["lost","orders"]}`, string(info.body))

	before := time.Now()
	delayed := e.publish(t, "orders", "?delay=1", "hello\x00world", "Enable-Job-Version: YES", "Job-Attr-Trace: abc")
	at := before.Add(1500 * time.Millisecond)
	atJob := e.publish(t, "orders", "?at="+at.UTC().Format(time.RFC3339Nano), "")
	after := time.Now()

	// Not consumable over HTTP: the job would never reach the broker.
	for _, q := range []string{"orders", "other,orders"} {
		requireError(t, do(t, "GET", e.api+"/api/shop/"+q, "", "X-Token: "+e.tok), http.StatusConflict, api.ErrForwarded)
	}
	require.Equal(t, http.StatusNotFound, do(t, "GET", e.api+"/api/shop/other", "", "X-Token: "+e.tok).status)

	xs := byBody(got.wait(t, 2))
	x := xs["hello\x00world"]
	checkTiming(t, x, before, after, time.Second)
	require.Equal(t, delayed, x.id)
	require.Equal(t, delayed, x.headers["rmq-id"])
	require.Equal(t, "shop.orders", x.headers["rmq-topic"])
	require.Equal(t, "1", x.headers["rmq-attempt"])
	require.Equal(t, "abc", x.headers["trace"])
	dueAt, err := time.Parse(time.RFC3339Nano, x.headers["rmq-due-at"])
	require.NoError(t, err)
	require.WithinDuration(t, before.Add(time.Second), dueAt, after.Sub(before)+10*time.Millisecond)

	y, ok := xs[""]
	require.True(t, ok, "the empty job arrived with an empty body")
	require.Equal(t, atJob, y.id)
	require.NotContains(t, y.headers, names.EmptyHeader)
	require.False(t, y.at.Before(at), "arrived before its instant")
	require.Less(t, y.at.Sub(at), 3*time.Second)

	ctx2, cancel2 := context.WithTimeout(context.Background(), waitLong)
	defer cancel2()
	info2, err := stream.Info(ctx2)
	require.NoError(t, err)
	require.EqualValues(t, 2, info2.State.Msgs, "JetStream stored both")
	require.Eventually(t, func() bool { return e.forwards(t)["default:shop/orders"].Forwarded == 2 }, waitLong, 20*time.Millisecond)

	// The stream goes away: two tries, both refused by JetStream, make the
	// job dead, and the error is shown.
	ctx3, cancel3 := context.WithTimeout(context.Background(), waitLong)
	defer cancel3()
	require.NoError(t, js.DeleteStream(ctx3, "LOST"))
	e.publish(t, "lost", "?tries=2", "lost job")
	require.Eventually(t, func() bool {
		a := do(t, "GET", e.api+"/api/shop/lost/deadletter/size", "")
		return strings.Contains(string(a.body), `"size":1`)
	}, waitLong, 50*time.Millisecond)
	lost := e.forwards(t)["default:shop/lost"]
	require.EqualValues(t, 2, lost.Failed)
	require.Zero(t, lost.Forwarded)
	require.Contains(t, lost.LastError, "no response from stream")
	require.NotNil(t, lost.LastErrorAt)
	// The dashboard's panel shows the same.
	dash := string(do(t, "GET", e.admin+"/dashboard/", "").body)
	i := strings.Index(dash, `<tr data-forward="shop.lost">`)
	require.GreaterOrEqual(t, i, 0, dash)
	require.Contains(t, dash[i:], `<td class="n bad">2</td>`)
	require.Contains(t, dash[i:], "no response from stream")
	require.Contains(t, dash, `<tr data-forward="shop.orders">`)
	require.Contains(t, string(do(t, "GET", e.admin+"/dashboard/topic?name=shop.orders", "").body),
		"Forwarded to <b>nats://"+srv.Addr()+"/fw.orders</b> when due: 2 forwarded")
	ok2 := e.forwards(t)["default:shop/orders"]
	require.Zero(t, ok2.Failed)
	require.Empty(t, ok2.LastError)

	require.Equal(t, 0, e.stop(t))
	require.NotContains(t, e.out.String(), "rmqd: close")
}

// GET /forwards in a service: the JSON shape, ?pool=, and the admin
// accounts in front of it (it shows brokers and their errors).
func TestForwardsRoute(t *testing.T) {
	srv, js := natsWithStreamFW(t)
	spec, err := forward.ParseForward("shop/orders=nats://" + srv.Addr() + "/fw.orders")
	require.NoError(t, err)
	e := newEnv(t, func(c *service.Config) {
		c.Accounts = map[string]string{"ops": "s3cret"}
		c.Forwards = []forward.Spec{spec}
	})
	get := func(path string, hdr ...string) answer { return do(t, "GET", e.admin.URL+path, "", hdr...) }
	const auth = "Authorization: Basic b3BzOnMzY3JldA==" // ops:s3cret
	require.Equal(t, http.StatusUnauthorized, get("/forwards").status)
	a := get("/forwards", auth)
	require.Equal(t, http.StatusOK, a.status)
	require.JSONEq(t, `[{"pool":"default","namespace":"shop","queue":"orders","target":"nats://`+srv.Addr()+`/fw.orders","forwarded":0,"failed":0}]`, string(a.body))
	require.JSONEq(t, `[]`, string(get("/forwards?pool=other", auth).body))
	requireError(t, get("/forwards?pool=nope", auth), http.StatusBadRequest, "the pool was not exists")

	// A forward that fails shows the error and when it happened.
	f := e.svc.Pools[names.DefaultPool].ForwardOf("shop", "orders")
	require.NotNil(t, f)
	require.NoError(t, js.DeleteStream(context.Background(), "FW"))
	a = do(t, "POST", e.admin.URL+"/token/shop?description=x", "", auth)
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	var tok map[string]string
	a.json(t, &tok)
	e.publish(tok["token"], "shop", "orders", "", "x")
	require.Eventually(t, func() bool { return f.Failed.Load() == 1 }, waitLong, 10*time.Millisecond)
	var list []forward.Status
	get("/forwards", auth).json(t, &list)
	require.Len(t, list, 1)
	require.Contains(t, list[0].LastError, "no response from stream")
	require.WithinDuration(t, time.Now(), *list[0].LastErrorAt, waitLong)
	require.Contains(t, e.log.String(), "rmqd: forward failed")
}

func TestPublishedMessageUndoesTheEmptyMarker(t *testing.T) {
	m := &consumer.Message{ID: "a", Body: []byte(" "), Headers: map[string]string{names.EmptyHeader: "1", "trace": "x"}}
	got := forward.PublishedMessage(m)
	require.Equal(t, []byte{}, got.Body)
	require.Equal(t, map[string]string{"trace": "x"}, got.Headers)
	require.Equal(t, " ", string(m.Body), "the delivery itself is left alone")
	require.Len(t, m.Headers, 2)
	require.Nil(t, forward.PublishedMessage(&consumer.Message{Body: []byte(" "), Headers: map[string]string{names.EmptyHeader: "1"}}).Headers)
	plain := &consumer.Message{Body: []byte(" ")}
	require.Same(t, plain, forward.PublishedMessage(plain))
}

// nats-server goes away while a job comes due: the forward fails (a
// failed try, retried after its backoff), rmqd's connection reconnects
// once the server is back, and the job is in the stream once.
func TestBinaryForwardNATSOutage(t *testing.T) {
	srv := brokertest.NATS(t)
	stream := func(f func(js jetstream.JetStream, ctx context.Context)) {
		t.Helper()
		nc, err := nats.Connect(srv.URL())
		require.NoError(t, err)
		defer nc.Close()
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		f(js, ctx)
	}
	stream(func(js jetstream.JetStream, ctx context.Context) {
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "FW", Subjects: []string{"fw.orders"}, Storage: jetstream.FileStorage})
		require.NoError(t, err)
	})
	e := startForwarding(t, "shop/orders=nats://"+srv.Addr()+"/fw.orders")

	require.NoError(t, srv.Shutdown())
	id := e.publish(t, "orders", "?tries=16", "during the outage")
	require.Eventually(t, func() bool { return e.forwards(t)["default:shop/orders"].Failed >= 1 }, waitLong, 20*time.Millisecond)
	require.Zero(t, e.forwards(t)["default:shop/orders"].Forwarded)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	require.NoError(t, srv.Restart(ctx))

	// The job's retries wait 1 s, 2 s, 4 s ...: generous bound.
	require.Eventually(t, func() bool { return e.forwards(t)["default:shop/orders"].Forwarded == 1 }, 2*waitLong, 50*time.Millisecond)
	stream(func(js jetstream.JetStream, ctx context.Context) {
		s, err := js.Stream(ctx, "FW")
		require.NoError(t, err)
		info, err := s.Info(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 1, info.State.Msgs)
		m, err := s.GetMsg(ctx, info.State.LastSeq)
		require.NoError(t, err)
		require.Equal(t, id, m.Header.Get(jetstream.MsgIDHeader))
		require.Equal(t, "during the outage", string(m.Data))
	})
	require.JSONEq(t, `{"namespace":"shop","queue":"orders","size":0}`, string(do(t, "GET", e.api+"/api/shop/orders/deadletter/size", "").body))
	out := e.out.String()
	for _, line := range []string{"rmqd: NATS connection lost; reconnecting", "rmqd: forward failed", "rmqd: NATS connection back", "rmqd: forward works again"} {
		require.Contains(t, out, line)
	}
	require.Equal(t, 0, e.stop(t))
}

// natsWithStreamFW starts a nats-server with JetStream holding the stream
// FW over the subjects fw.>, where the forwards of these tests publish,
// and a JetStream client of it.
func natsWithStreamFW(t *testing.T) (*brokerserver.NATS, jetstream.JetStream) {
	t.Helper()
	srv := brokertest.NATS(t)
	nc, err := nats.Connect(srv.URL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "FW", Subjects: []string{"fw.>"}})
	require.NoError(t, err)
	return srv, js
}
