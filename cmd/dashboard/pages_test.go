package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/dashboard"
	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

func TestOverviewListsEveryTopicWithItsCounts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	orders := e.topic("orders", topic.FixedTime, 4)
	jobs := e.topic("jobs", topic.Priority, 2)
	prices := e.topic("prices", topic.RangeMerge, 8)
	for j := range 3 {
		e.send(orders, fmt.Sprint("due", j), "x")
	}
	for j := range 2 {
		_, err := e.prod.SendFixedTime(ctx, orders, []byte("later"), time.Now().Add(time.Hour), producer.WithKey(fmt.Sprint("later", j)))
		require.NoError(t, err)
	}
	e.send(jobs, "j1", "x")
	e.makeDead(prices, "boom", "p1", "x", "p2", "y")

	page := e.get("")
	row := func(name string) string {
		i := strings.Index(page, `<tr data-topic="`+name+`">`)
		require.GreaterOrEqual(t, i, 0, name)
		return page[i : i+strings.Index(page[i:], "</tr>")]
	}
	cell := func(r, k string) string {
		i := strings.Index(r, `data-k="`+k+`">`)
		require.GreaterOrEqual(t, i, 0, k)
		r = r[i+len(`data-k="`+k+`">`):]
		return r[:strings.Index(r, "</td>")]
	}
	o := row("orders")
	assert.Contains(t, o, "fixedtime")
	assert.Equal(t, "5", cell(o, "waiting"))
	assert.Equal(t, "3", cell(o, "due"))
	assert.Equal(t, "2", cell(o, "delayed"))
	assert.Equal(t, "0", cell(o, "dead"))
	j := row("jobs")
	assert.Equal(t, "1", cell(j, "waiting"))
	assert.Equal(t, "1", cell(j, "due"))
	p := row("prices")
	assert.Equal(t, "2", cell(p, "dead"))
	assert.Equal(t, "0", cell(p, "waiting"))
	assert.Contains(t, p, "running")
	// Topics sorted by name, with links that resolve under the mount.
	assert.Less(t, strings.Index(page, `data-topic="jobs"`), strings.Index(page, `data-topic="orders"`))
	assert.Contains(t, page, `href="topic?name=orders"`)
	// Redis facts; the shared test server does not evict.
	assert.Contains(t, page, "7.")
	assert.Contains(t, page, "noeviction")
	assert.NotContains(t, page, `id="eviction-warning"`)

	// The JSON snapshot the charts poll says the same.
	code, hdr, body := e.do(http.MethodGet, "api/overview", nil, nil)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "application/json", hdr.Get("Content-Type"))
	var snap struct {
		TimeMs int64 `json:"time_ms"`
		Topics []struct {
			Name                                  string
			Type                                  string
			Slots                                 int
			Waiting, Due, Delayed, InFlight, Dead int64
		}
	}
	require.NoError(t, json.Unmarshal([]byte(body), &snap))
	require.Len(t, snap.Topics, 3)
	assert.InDelta(t, time.Now().UnixMilli(), snap.TimeMs, 10_000)
	assert.Equal(t, "orders", snap.Topics[1].Name)
	assert.Equal(t, []int64{5, 3, 2, 0}, []int64{snap.Topics[1].Waiting, snap.Topics[1].Due, snap.Topics[1].Delayed, snap.Topics[1].Dead})
	assert.Equal(t, 8, snap.Topics[2].Slots)
	assert.Equal(t, int64(2), snap.Topics[2].Dead)
}

func TestOverviewWarnsWhenRedisMayEvict(t *testing.T) {
	// A server of its own: the shared one must not be reconfigured.
	srv := redistest.Start(t, redisserver.Config{})
	rdb := redistest.Client(t, srv)
	require.NoError(t, rdb.ConfigSet(context.Background(), "maxmemory-policy", "allkeys-lru").Err())
	e := newEnvOn(t, rdb)
	page := e.get("")
	assert.Contains(t, page, "allkeys-lru")
	assert.Contains(t, page, `id="eviction-warning"`)
}

func TestOverviewWithoutTopics(t *testing.T) {
	e := newEnv(t)
	assert.Contains(t, e.get(""), "No topic is stored under this key prefix yet")
}

func TestTopicPageListsWaitingInDeliveryOrderPagedByCursor(t *testing.T) {
	e := newEnv(t, dashboard.WithPageSize(7))
	ctx := context.Background()
	tp := e.topic("orders", topic.FixedTime, 4)
	base := time.Now().Add(time.Hour).Truncate(time.Second)
	var batch []producer.BatchMessage
	// Due times descend as keys ascend, and pairs share a due time, so the
	// order is by due time first and ties are broken across slots.
	for j := range 30 {
		key := fmt.Sprintf("m%02d", j)
		batch = append(batch, producer.BatchMessage{Key: key, Body: []byte(key), At: base.Add(time.Duration(30-j/2) * time.Minute)})
	}
	_, err := e.prod.SendBatch(ctx, tp, batch)
	require.NoError(t, err)

	var got []string
	path := "topic?name=orders"
	pages := 0
	for path != "" {
		page := e.get(path)
		got = append(got, ids(t, page, "waiting")...)
		path = link(t, page, "waiting-next")
		pages++
		require.LessOrEqual(t, pages, 10)
	}
	assert.Equal(t, 5, pages) // 30 messages, 7 a page
	require.Len(t, got, 30)
	// Every message once, in due order (equal due times in any slot order).
	seen := map[string]bool{}
	for _, id := range got {
		assert.False(t, seen[id], "listed twice: %s", id)
		seen[id] = true
	}
	for j := 0; j+1 < len(got); j++ {
		var a, b int
		fmt.Sscanf(got[j], "m%d", &a)
		fmt.Sscanf(got[j+1], "m%d", &b)
		assert.GreaterOrEqual(t, a/2, b/2, "m%02d listed before m%02d", a, b)
	}

	// A cursor whose message is gone continues after where it was.
	first := e.get("topic?name=orders")
	next := link(t, first, "waiting-next")
	page1 := ids(t, first, "waiting")
	removed, err := e.insp.Remove(ctx, tp, page1[len(page1)-1])
	require.NoError(t, err)
	require.True(t, removed)
	assert.Equal(t, got[7:14], ids(t, e.get(next), "waiting"))
}

func TestTopicPagePriorityOrderAndCounts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tp := e.topic("jobs", topic.Priority, 2)
	for _, p := range []int64{50, 900, 20, 300} {
		_, err := e.prod.SendPriority(ctx, tp, []byte("x"), p, producer.WithKey(fmt.Sprint("p", p)))
		require.NoError(t, err)
	}
	page := e.get("topic?name=jobs")
	assert.Equal(t, []string{"p900", "p300", "p50", "p20"}, ids(t, page, "waiting"))
	assert.Contains(t, page, "highest priority first")
	assert.NotContains(t, page, `id="due-histogram"`) // no due times
	assert.Contains(t, page, `<b id="c-waiting">4</b>`)
}

func TestTopicPageHistogramOfDueTimes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tp := e.topic("orders", topic.FixedTime, 2)
	now := time.Now()
	at := map[string]time.Time{
		"late1": now.Add(-2 * time.Hour), "late2": now.Add(-2 * time.Hour), "late3": now.Add(-5 * time.Second),
		"soon1": now.Add(30 * time.Second), "mid1": now.Add(3 * time.Hour), "mid2": now.Add(4 * time.Hour),
		"far1": now.Add(30 * 24 * time.Hour),
	}
	for k, a := range at {
		_, err := e.prod.SendFixedTime(ctx, tp, []byte(k), a, producer.WithKey(k))
		require.NoError(t, err)
	}
	page := e.get("topic?name=orders")
	i := strings.Index(page, `id="due-histogram"`)
	require.GreaterOrEqual(t, i, 0)
	hist := page[i : i+strings.Index(page[i:], "</section>")]
	count := func(label string) string {
		j := strings.Index(hist, `<span class="lbl">`+label+`</span>`)
		require.GreaterOrEqual(t, j, 0, label)
		rest := hist[j:]
		k := strings.Index(rest, `<span class="cnt">`) + len(`<span class="cnt">`)
		return rest[k : k+strings.Index(rest[k:], "<")]
	}
	assert.Equal(t, "2", count("&gt; 1 h late"))
	assert.Equal(t, "1", count("1 – 10 s late"))
	assert.Equal(t, "1", count("next minute"))
	assert.Equal(t, "2", count("1 – 6 h"))
	assert.Equal(t, "1", count("later"))
	assert.Equal(t, "0", count("6 – 24 h"))
}

func TestTopicPageShowsInFlightWithAttemptAndLease(t *testing.T) {
	e := newEnv(t)
	tp := e.topic("work", topic.FixedTime, 2)
	started := make(chan string, 1)
	release := make(chan struct{})
	e.client(tp, func(ctx context.Context, m *consumer.Message) error {
		started <- m.ID
		<-release
		return nil
	}, consumer.WithConcurrency(1), consumer.WithPrepareTimeout(30*time.Second))
	defer close(release)
	e.send(tp, "busy", "x")
	var id string
	select {
	case id = <-started:
	case <-time.After(waitLong):
		t.Fatal("no delivery")
	}
	page := e.get("topic?name=work")
	assert.Equal(t, []string{id}, ids(t, page, "inflight"))
	i := strings.Index(page, `id="inflight"`)
	section := page[i:]
	assert.Contains(t, section, `<td class="n">1</td><td>`)                       // attempt 1
	assert.Regexp(t, `<td class="muted">in (2[0-9]|30)(\.[0-9])?s</td>`, section) // lease about 30 s ahead
	msg := e.get("message?topic=work&id=" + id)
	assert.Contains(t, msg, "in flight")
	assert.Contains(t, msg, "attempt 1, lease until")
}

func TestTopicPageListsDeadPagedWithLastError(t *testing.T) {
	e := newEnv(t, dashboard.WithPageSize(3))
	tp := e.topic("prices", topic.RangeMerge, 4)
	var kb []string
	for j := range 7 {
		kb = append(kb, fmt.Sprint("d", j), fmt.Sprintf(`{"n":%d}`, j))
	}
	e.makeDead(tp, "price feed said 503", kb...)
	var got []string
	path := "topic?name=prices"
	for n := 0; path != ""; n++ {
		require.Less(t, n, 5)
		page := e.get(path)
		got = append(got, ids(t, page, "dead")...)
		assert.Contains(t, page, "price feed said 503")
		path = link(t, page, "dead-next")
	}
	assert.ElementsMatch(t, []string{"d0", "d1", "d2", "d3", "d4", "d5", "d6"}, got)
	assert.Contains(t, e.get("topic?name=prices"), `<b id="c-dead">7</b>`)
}

func TestTopicPageErrors(t *testing.T) {
	e := newEnv(t)
	e.send(e.topic("orders", topic.FixedTime, 2), "a", "x")
	for path, want := range map[string]int{
		"topic?name=nosuch":                http.StatusNotFound,
		"topic?name=bad%7Bname":            http.StatusBadRequest,
		"topic?name=orders&wc=garbage":     http.StatusBadRequest,
		"topic?name=orders&dc=garbage":     http.StatusBadRequest,
		"message?topic=orders&id=nosuch":   http.StatusNotFound,
		"message?topic=orders":             http.StatusBadRequest,
		"message?topic=nosuch&id=a":        http.StatusNotFound,
		"search?id=nosuch":                 http.StatusNotFound,
		"nosuchpage":                       http.StatusNotFound,
		"api/overview?x=1":                 http.StatusOK,
		"assets/nosuch.js":                 http.StatusNotFound,
		"topic?name=orders&fc=z1.bm90Om9r": http.StatusBadRequest,
	} {
		code, _, body := e.do(http.MethodGet, path, nil, nil)
		assert.Equal(t, want, code, "%s: %s", path, body)
	}
}

func TestMessagePageShowsBodyAsTextJSONAndHex(t *testing.T) {
	e := newEnv(t)
	tp := e.topic("orders", topic.FixedTime, 2)
	e.makeDead(tp, "card declined", "o1", `{"order":42,"items":["a","b"]}`)
	page := e.get("message?topic=orders&id=o1")
	assert.Contains(t, page, `<span class="badge state">dead</span>`)
	assert.Contains(t, page, "card declined")
	assert.Contains(t, page, `<td id="attempts">1</td>`)
	// JSON is shown pretty by default.
	assert.Contains(t, page, "{\n  &#34;order&#34;: 42,\n  &#34;items&#34;: [\n")
	text := e.get("message?topic=orders&id=o1&view=text")
	assert.Contains(t, text, `<pre class="body" id="body">{&#34;order&#34;:42,&#34;items&#34;:[&#34;a&#34;,&#34;b&#34;]}</pre>`)
	hex := e.get("message?topic=orders&id=o1&view=hex")
	assert.Contains(t, hex, "7b 22 6f 72 64 65 72 22") // {"order"

	// A binary body opens as hex.
	e.makeDead(tp, "bad bytes", "bin", "\xff\x00\xfe")
	bin := e.get("message?topic=orders&id=bin")
	assert.Contains(t, bin, "ff 00 fe")

	// A waiting message shows its due time.
	due := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	_, err := e.prod.SendFixedTime(context.Background(), tp, []byte("x"), due, producer.WithKey("w"))
	require.NoError(t, err)
	w := e.get("message?topic=orders&id=w")
	assert.Contains(t, w, `<span class="badge state">waiting</span>`)
	assert.Contains(t, w, due.UTC().Format("2006-01-02 15:04:05.000"))
}

func TestBodiesAndErrorsAreEscaped(t *testing.T) {
	e := newEnv(t)
	tp := e.topic("evil", topic.FixedTime, 2)
	const payload = `<script>alert("pwned")</script>`
	e.makeDead(tp, `<img src=x onerror=alert(1)>`, `<b>id</b>`, payload)
	for _, path := range []string{
		"topic?name=evil",
		"message?topic=evil&id=" + url.QueryEscape(`<b>id</b>`),
		"message?topic=evil&id=" + url.QueryEscape(`<b>id</b>`) + "&view=text",
	} {
		page := e.get(path)
		assert.NotContains(t, page, "<script>alert", path)
		assert.NotContains(t, page, "<img src=x", path)
		assert.NotContains(t, page, "<b>id</b>", path)
		assert.Contains(t, page, "&lt;img src=x onerror=alert(1)&gt;", path)
	}
	text := e.get("message?topic=evil&id=" + url.QueryEscape(`<b>id</b>`) + "&view=text")
	assert.Contains(t, text, `&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;`)
	// A flash message the dashboard did not sign is not shown at all
	// (flash_test.go); one it signed is its own text, escaped as any.
	assert.NotContains(t, e.get("?flash="+url.QueryEscape(payload)), "script&gt;")
}

func TestSearchOpensTheMessagePage(t *testing.T) {
	e := newEnv(t)
	e.send(e.topic("a", topic.FixedTime, 2), "one", "x")
	e.send(e.topic("b", topic.Priority, 2), "two", "y")
	code, hdr, _ := e.do(http.MethodGet, "search?id=two", nil, nil)
	require.Equal(t, http.StatusSeeOther, code)
	assert.Equal(t, "message?id=two&topic=b", hdr.Get("Location"))
	code, hdr, _ = e.do(http.MethodGet, "search?topic=a&id=one", nil, nil)
	require.Equal(t, http.StatusSeeOther, code)
	assert.Equal(t, "message?id=one&topic=a", hdr.Get("Location"))
	code, _, _ = e.do(http.MethodGet, "search?topic=a&id=two", nil, nil)
	assert.Equal(t, http.StatusNotFound, code)
}
