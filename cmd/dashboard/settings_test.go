package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/dashboard"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

func (e *env) limits(t topic.Topic) rmq.Limits {
	e.t.Helper()
	l, err := e.insp.Limits(context.Background(), t)
	require.NoError(e.t, err)
	return l
}

func (e *env) life(t topic.Topic) rmq.Lifecycle {
	e.t.Helper()
	l, err := e.insp.Lifecycle(context.Background(), t)
	require.NoError(e.t, err)
	return l
}

// The settings form stores a topic's limits and lifecycle, shows them
// back, and changes only what changed; emptied fields clear them.
func TestSettingsStoreLimitsAndLifecycle(t *testing.T) {
	e := newEnv(t)
	tp := e.topic("jobs", topic.Priority, 4)
	e.send(tp, "j1", "x")
	assert.Contains(t, e.get("topic?name=jobs"), `href="settings?topic=jobs" id="settings-link"`)
	page := e.get("settings?topic=jobs")
	assert.Contains(t, page, `<td id="limits">none</td>`)

	loc := e.actLoc(url.Values{"op": {"settings"}, "topic": {"jobs"}, "rate": {"50"}, "rate_per": {"2s"}, "conc": {"5"},
		"gconc": {"1"}, "retention": {"72h"}, "events": {"1000"}})
	assert.Equal(t, "settings", loc.Path)
	assert.Equal(t, "Stored limits rate=50/2s conc=5 gconc=1; retention 72h0m0s, event log 1000.", loc.Query().Get("flash"))
	assert.Equal(t, rmq.Limits{Rate: 50, RatePer: 2 * time.Second, Concurrency: 5, GroupConcurrency: 1}, e.limits(tp))
	assert.Equal(t, rmq.Lifecycle{Retention: 72 * time.Hour, Events: 1000}, e.life(tp))
	page = e.get(loc.String())
	assert.Contains(t, page, `<td id="limits">rate=50/2s conc=5 gconc=1</td>`)
	assert.Contains(t, page, `id="retention" name="retention" class="dur" value="72h0m0s"`)
	assert.Contains(t, page, `<p class="flash" id="flash">Stored limits`)
	// The topic page shows the limits, as any stored ones.
	assert.Contains(t, e.get("topic?name=jobs"), `<td id="limits">rate=50/2s conc=5 gconc=1</td>`)

	// The same form again changes nothing; a rate without its period is per
	// second; emptied fields clear what they held.
	assert.Equal(t, "Nothing changed.", e.act(url.Values{"op": {"settings"}, "topic": {"jobs"}, "rate": {"50"}, "rate_per": {"2s"},
		"conc": {"5"}, "gconc": {"1"}, "retention": {"72h"}, "events": {"1000"}}))
	assert.Equal(t, "Stored limits rate=7/1s; retention 0s, event log 0.", e.act(url.Values{"op": {"settings"}, "topic": {"jobs"}, "rate": {"7"}}))
	assert.Equal(t, rmq.Limits{Rate: 7, RatePer: time.Second}, e.limits(tp))
	assert.Equal(t, rmq.Lifecycle{}, e.life(tp))
}

// A bad value stores nothing: neither the limits nor the lifecycle of the
// same form.
func TestSettingsRefuseBadValues(t *testing.T) {
	e := newEnv(t)
	tp := e.topic("jobs", topic.FixedTime, 4)
	e.send(tp, "j1", "x")
	for _, f := range []url.Values{
		{"conc": {"many"}, "retention": {"1h"}},
		{"conc": {"-1"}},
		{"rate": {"5"}, "rate_per": {"soon"}},
		{"rate": {"5"}, "rate_per": {"48h"}}, // beyond the library's 24h
		{"retention": {"-1h"}, "conc": {"3"}},
		{"events": {"x"}},
	} {
		f.Set("op", "settings")
		f.Set("topic", "jobs")
		code, _, body := e.post(f)
		assert.Equal(t, http.StatusBadRequest, code, "%v: %s", f, body)
		assert.Equal(t, rmq.Limits{}, e.limits(tp), "%v", f)
		assert.Equal(t, rmq.Lifecycle{}, e.life(tp), "%v", f)
	}
	code, _, _ := e.post(url.Values{"op": {"settings"}, "topic": {"nope"}, "conc": {"1"}})
	assert.Equal(t, http.StatusNotFound, code)
}

// A settings post from another origin, or without the page's token, is
// refused and stores nothing; a read-only dashboard shows the settings
// without a form to change them and refuses the post.
func TestSettingsRefusedCrossSite(t *testing.T) {
	e := newEnv(t)
	tp := e.topic("jobs", topic.FixedTime, 4)
	e.send(tp, "j1", "x")
	tok := e.token()
	form := func() url.Values {
		return url.Values{"op": {"settings"}, "topic": {"jobs"}, "conc": {"1"}, "csrf": {tok}, "confirm": {"yes"}}
	}
	for _, c := range []struct {
		name string
		hdr  map[string]string
		form url.Values
	}{
		{"other origin", map[string]string{"Origin": "http://evil.test"}, form()},
		{"cross-site fetch", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": e.srv.URL}, form()},
		{"same site, other port", map[string]string{"Sec-Fetch-Site": "same-site"}, form()},
		{"no origin at all", nil, form()},
		{"no token", map[string]string{"Origin": e.srv.URL}, url.Values{"op": {"settings"}, "topic": {"jobs"}, "conc": {"1"}}},
		{"wrong token", map[string]string{"Origin": e.srv.URL}, url.Values{"op": {"settings"}, "topic": {"jobs"}, "conc": {"1"}, "csrf": {strings.Repeat("A", 43)}}},
	} {
		code, _, body := e.do(http.MethodPost, "action", c.form, c.hdr)
		assert.Equal(t, http.StatusForbidden, code, "%s: %s", c.name, body)
		assert.Equal(t, rmq.Limits{}, e.limits(tp), c.name)
	}

	ro := newEnvOn(t, e.rdb, dashboard.WithReadOnly(), dashboard.WithKeyPrefix(e.prefix))
	page := ro.get("settings?topic=jobs")
	assert.NotContains(t, page, `id="save"`)
	assert.Contains(t, page, ` disabled>`)
	code, _, _ := ro.do(http.MethodPost, "action", url.Values{"op": {"settings"}, "topic": {"jobs"}, "conc": {"1"}}, map[string]string{"Origin": ro.srv.URL})
	assert.Equal(t, http.StatusForbidden, code)
	assert.Equal(t, rmq.Limits{}, e.limits(tp))
}
