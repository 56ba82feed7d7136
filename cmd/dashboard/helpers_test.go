package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/dashboard"
	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

const waitLong = rmqtest.WaitLong

// mount is where the tests' host serves the dashboard.
const mount = "/dash"

// env is one test's dashboard: a host server that mounts it under /dash/
// with http.StripPrefix, on the shared redis-server with the test's own key
// prefix, and a browser-like HTTP client (cookies, same-origin headers,
// redirects not followed so tests see them).
type env struct {
	t      *testing.T
	rdb    redis.UniversalClient
	prefix string
	prod   *producer.Producer
	insp   *rmq.Inspector
	srv    *httptest.Server
	hc     *http.Client
}

func newEnv(t *testing.T, opts ...dashboard.Option) *env {
	t.Helper()
	return newEnvOn(t, redistest.Client(t, redistest.Shared(t)), opts...)
}

func newEnvOn(t *testing.T, rdb redis.UniversalClient, opts ...dashboard.Option) *env {
	t.Helper()
	e := &env{t: t, rdb: rdb, prefix: redistest.Prefix(t)}
	e.prod = rmqtest.Producer(t, rdb, e.prefix)
	e.insp = rmq.NewInspector(rdb, rmq.WithPrefix(e.prefix))
	base := []dashboard.Option{dashboard.WithKeyPrefix(e.prefix), dashboard.WithLogger(slog.New(slog.DiscardHandler))}
	mux := http.NewServeMux()
	mux.Handle(mount+"/", http.StripPrefix(mount, dashboard.New(rdb, append(base, opts...)...)))
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	e.hc = &http.Client{
		Jar:           jar,
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return e
}

// do sends a request to the dashboard; path is relative to the mount.
func (e *env) do(method, path string, form url.Values, hdr map[string]string) (int, http.Header, string) {
	e.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, e.srv.URL+mount+"/"+path, body)
	require.NoError(e.t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := e.hc.Do(req)
	require.NoError(e.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	return res.StatusCode, res.Header, string(b)
}

// get returns a page, requiring status 200.
func (e *env) get(path string) string {
	e.t.Helper()
	code, _, body := e.do(http.MethodGet, path, nil, nil)
	require.Equal(e.t, http.StatusOK, code, "GET %s: %s", path, body)
	return body
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`)

// token loads the overview (which sets the CSRF cookie) and returns the
// page's CSRF token.
func (e *env) token() string {
	e.t.Helper()
	m := csrfMeta.FindStringSubmatch(e.get(""))
	require.NotNil(e.t, m, "no CSRF token on the overview")
	return m[1]
}

// post sends an action as a same-origin browser form would.
func (e *env) post(form url.Values) (int, http.Header, string) {
	e.t.Helper()
	if !form.Has("csrf") {
		form.Set("csrf", e.token())
	}
	return e.do(http.MethodPost, "action", form, map[string]string{"Origin": e.srv.URL})
}

// act posts a confirmed action and returns the flash message of the page
// it redirects to.
func (e *env) act(form url.Values) string {
	e.t.Helper()
	return e.actLoc(form).Query().Get("flash")
}

// actLoc is act's redirect: the page the action goes back to.
func (e *env) actLoc(form url.Values) *url.URL {
	e.t.Helper()
	form.Set("confirm", "yes")
	code, hdr, body := e.post(form)
	require.Equal(e.t, http.StatusSeeOther, code, body)
	loc, err := url.Parse(hdr.Get("Location"))
	require.NoError(e.t, err)
	require.False(e.t, loc.IsAbs(), "redirect %s must be relative", loc)
	return loc
}

func (e *env) topic(name string, typ topic.Type, slotAmount int) topic.Topic {
	e.t.Helper()
	t, err := topic.New(name, typ, slotAmount)
	require.NoError(e.t, err)
	return t
}

func (e *env) stats(t topic.Topic) rmq.Stats {
	e.t.Helper()
	st, err := e.insp.Stats(context.Background(), t)
	require.NoError(e.t, err)
	return st
}

// send stores one message of any type (due now, priority 100) with a key.
func (e *env) send(t topic.Topic, key string, body string) {
	e.t.Helper()
	ctx := context.Background()
	var err error
	switch t.Type() {
	case topic.RangeMerge:
		_, err = e.prod.SendRangeMerge(ctx, t, []byte(body), 0, producer.WithKey(key))
	case topic.Priority:
		_, err = e.prod.SendPriority(ctx, t, []byte(body), 100, producer.WithKey(key))
	default:
		_, err = e.prod.SendFixedTime(ctx, t, []byte(body), time.Now(), producer.WithKey(key))
	}
	require.NoError(e.t, err)
}

// client returns a started rmq.Client on the env's prefix with one
// listener, closed at the end of the test.
func (e *env) client(t topic.Topic, l consumer.ListenerFunc, opts ...consumer.Option) *rmq.Client {
	e.t.Helper()
	c, err := rmq.New(e.rdb, rmq.WithPrefix(e.prefix), rmq.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(e.t, err)
	require.NoError(e.t, c.Register(t, l, opts...))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(e.t, c.Start(ctx))
	e.t.Cleanup(func() { closeClient(e.t, c) })
	return c
}

func closeClient(t *testing.T, c *rmq.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Errorf("close client: %v", err)
	}
}

// makeDead sends messages with these keys and bodies and lets a real
// consumer fail each once with cause, so they land in the dead queue with
// that last error.
func (e *env) makeDead(t topic.Topic, cause string, keysAndBodies ...string) {
	e.t.Helper()
	before := e.stats(t).Dead
	for j := 0; j < len(keysAndBodies); j += 2 {
		e.send(t, keysAndBodies[j], keysAndBodies[j+1])
	}
	c := e.client(t, func(context.Context, *consumer.Message) error { return errors.New(cause) }, consumer.WithMaxRetries(0))
	want := before + int64(len(keysAndBodies)/2)
	e.waitFor(fmt.Sprintf("%d dead in %s", want, t.Name()), func() bool { return e.stats(t).Dead == want })
	closeClient(e.t, c)
}

// waitFor polls cond (a Redis read) until it holds.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	redistest.Poll(e.t, func() error {
		if !cond() {
			return fmt.Errorf("waiting for %s", what)
		}
		return nil
	})
}

// ids returns the message ids a page links to, in page order, from the
// section that starts at the heading with id section.
func ids(t *testing.T, page, section string) []string {
	t.Helper()
	i := strings.Index(page, `id="`+section+`"`)
	require.GreaterOrEqual(t, i, 0, "no section %s", section)
	rest := page[i:]
	if j := strings.Index(rest, "</section>"); j >= 0 {
		rest = rest[:j]
	}
	var out []string
	for _, m := range midLink.FindAllStringSubmatch(rest, -1) {
		out = append(out, htmlUnescape(m[1]))
	}
	return out
}

var midLink = regexp.MustCompile(`<a class="mid" href="[^"]*">([^<]*)</a>`)

func htmlUnescape(s string) string {
	r := strings.NewReplacer("&lt;", "<", "&gt;", ">", "&#34;", `"`, "&#39;", "'", "&amp;", "&")
	return r.Replace(s)
}

// link returns the href of the anchor with the given id attribute, HTML
// entities decoded.
func link(t *testing.T, page, id string) string {
	t.Helper()
	m := regexp.MustCompile(`<a href="([^"]*)" id="` + regexp.QuoteMeta(id) + `"`).FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return htmlUnescape(m[1])
}
