package main

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/internal/browsertest"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

// attackPage is a page of another site that posts a form to the admin
// listener as soon as it loads, as a page an admin visits while logged in
// could. A JSON body (a limit) is smuggled in a text/plain form: the field
// name is the JSON up to a string that swallows the "=".
var attackPage = template.Must(template.New("attack").Parse(`<!doctype html>
<html><body onload="document.forms[0].submit()">
<form method="post" action="{{.Action}}" enctype="{{.Enctype}}">
{{range $k, $v := .Fields}}<input type="hidden" name="{{$k}}" value="{{$v}}">{{end}}
</form></body></html>
`))

type attack struct {
	Action, Enctype string
	Fields          map[string]string
}

// Finding 2 in a real browser: while the admin is logged in (the browser
// sends the admin's credentials), pages of another site (evil.test) and of
// another port of the same host post forms to the admin listener: create a
// token, set a token's limit to 1 a day, pause a queue, turn the access
// log off, pause through the dashboard. Each is refused (the browser shows
// the 403) and nothing changed. A page at a rebound name (DNS rebinding)
// is refused too.
func TestBrowserAdminRefusesCrossSiteForms(t *testing.T) {
	ctx := browsertest.New(t, chromedp.Flag("host-resolver-rules", "MAP evil.test 127.0.0.1, MAP rebind.test 127.0.0.1"))
	srv := redistest.Shared(t)
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + redistest.Prefix(t)}, "--admin-account", "admin:"+adminPw)
	tok := newTokenOn(t, p.admin, "ns", adminHdr)
	require.Equal(t, http.StatusCreated, do(t, "PUT", p.api+"/api/ns/q", "x", "X-Token: "+tok).status)

	attacks := []attack{
		{Action: p.admin + "/token/ns?description=evil", Enctype: "application/x-www-form-urlencoded"},
		{Action: p.admin + "/token/ns/" + tok + "/limit", Enctype: "text/plain",
			Fields: map[string]string{`{"read":1,"write":1,"interval":86400,"x":"`: `"}`}},
		{Action: p.admin + "/queue/ns/q/pause", Enctype: "application/x-www-form-urlencoded"},
		{Action: p.admin + "/accesslog?status=disable", Enctype: "application/x-www-form-urlencoded"},
		{Action: p.admin + "/dashboard/action", Enctype: "application/x-www-form-urlencoded",
			Fields: map[string]string{"op": "pause", "topic": "ns.q", "confirm": "yes"}},
	}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/attack/"))
		if err != nil || i < 0 || i >= len(attacks) {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = attackPage.Execute(w, attacks[i])
	}))
	defer site.Close()
	sitePort := site.URL[strings.LastIndex(site.URL, ":")+1:]

	state := func() string {
		return fmt.Sprintf("%s|%s|%s|%s", do(t, "GET", p.admin+"/token/ns", "", adminHdr).body,
			do(t, "GET", p.admin+"/token/ns/"+tok+"/limit", "", adminHdr).body,
			do(t, "GET", p.admin+"/queue/ns/q", "", adminHdr).body, do(t, "GET", p.admin+"/accesslog", "").body)
	}
	before := state()
	require.Contains(t, before, `"paused":false`)
	require.Contains(t, before, `"enabled"`)

	// Logged in: the browser sends the admin's credentials with every request.
	_, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{
		"Authorization": strings.TrimPrefix(adminHdr, "Authorization: ")}})
	require.NoError(t, err)
	for _, origin := range []string{"http://evil.test:" + sitePort, "http://127.0.0.1:" + sitePort} {
		for i, a := range attacks {
			start := time.Now()
			browsertest.Do(t, ctx, chromedp.Navigate(fmt.Sprintf("%s/attack/%d", origin, i)))
			// The form sends the browser on to the admin listener's answer.
			body := pageText(t, ctx, p.admin)
			require.Equal(t, `{"error":"cross-site request refused"}`, body, "%s posting to %s", origin, a.Action)
			t.Logf("%s posting to %s: refused, shown after %v", origin, a.Action, time.Since(start).Round(time.Millisecond))
		}
	}
	require.Equal(t, before, state(), "nothing changed")

	// DNS rebinding: the attacker's name, pointed at the admin listener.
	port := p.admin[strings.LastIndex(p.admin, ":")+1:]
	browsertest.Do(t, ctx, chromedp.Navigate("http://rebind.test:"+port+"/token/ns"))
	require.Equal(t, `{"error":"host not served: add it with --admin-host"}`, pageText(t, ctx, "http://rebind.test:"))
	// The admin's own pages work: the dashboard by its address, and its
	// navigation leads to the token page, styled as the dashboard is.
	browsertest.Do(t, ctx, chromedp.Navigate(p.admin+"/dashboard/"), chromedp.WaitVisible(chromedp.CSS(`tr[data-topic="ns.q"]`)),
		chromedp.Click(chromedp.CSS(`header.top nav a[href="tokens"]`)), chromedp.WaitVisible(chromedp.CSS(`#tokens`)))
	require.Equal(t, "rgb(29, 36, 51)", evaluate[string](t, ctx, `getComputedStyle(document.querySelector("header.top")).backgroundColor`),
		"the dashboard's stylesheet applies")
	require.Equal(t, "ns", browsertest.Text(t, ctx, `#tokens tbody td:nth-child(2)`))
	require.Equal(t, tok[:4]+"…", browsertest.Text(t, ctx, `#tokens tbody td:nth-child(3)`))
	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`header.top nav a[href="./"]`)), chromedp.WaitVisible(chromedp.CSS(`tr[data-topic="ns.q"]`)))
}

func evaluate[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, browsertest.StepTimeout)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[T](expr))
	require.NoError(t, err, expr)
	return v
}

// pageText waits until the browser shows a page whose address starts with
// prefix, loaded, and returns its text. It asks from here, again and
// again: a script polling in the page would be lost when a form sends the
// browser on.
func pageText(t *testing.T, ctx context.Context, prefix string) string {
	t.Helper()
	var body string
	require.Eventually(t, func() bool {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		v, err := chromedp.Run(sctx, chromedp.Evaluate[string](fmt.Sprintf(
			`location.href.startsWith(%q) && document.readyState === "complete" ? document.body.innerText : ""`, prefix)))
		body = v
		return err == nil && v != ""
	}, 20*time.Second, 50*time.Millisecond, "a page at %s", prefix)
	return body
}
