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

// The schedules page lists every schedule with its next and last firing;
// pause, resume, trigger and remove are confirmed, CSRF-checked actions.
// No client runs, so nothing fires but what the actions send.
func TestSchedulesPageAndActions(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tp := e.topic("reports", topic.FixedTime, 2)
	s := rmq.NewSchedules(e.rdb, rmq.WithPrefix(e.prefix))
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	require.NoError(t, s.Set(ctx, rmq.Schedule{Name: "nightly", Spec: "30 2 * * *", Location: berlin, Topic: tp, Body: []byte("r")}))
	require.NoError(t, s.Set(ctx, rmq.Schedule{Name: "hourly", Spec: "@hourly", Topic: tp, Body: []byte("h"), Paused: true}))

	page := e.get("schedules")
	assert.Contains(t, page, `<tr data-schedule="nightly">`)
	assert.Contains(t, page, "Europe/Berlin")
	info, err := s.Get(ctx, "nightly")
	require.NoError(t, err)
	assert.Contains(t, page, info.Next.UTC().Format("2006-01-02 15:04:05.000"), "the next firing")
	assert.Contains(t, page, `<span class="badge paused">paused</span>`)
	assert.Contains(t, e.get(""), `href="schedules"`, "the layout links the page")

	act := func(op, name string) string {
		return e.act(url.Values{"op": {op}, "topic": {"reports"}, "id": {name}, "return": {"schedules"}})
	}
	// Asked first, done after the confirmation.
	code, _, confirm := e.post(url.Values{"op": {"schedule-pause"}, "topic": {"reports"}, "id": {"nightly"}, "return": {"schedules"}})
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, confirm, "Pause schedule nightly?")
	info, err = s.Get(ctx, "nightly")
	require.NoError(t, err)
	assert.False(t, info.Paused, "nothing changes before the confirmation")

	assert.Equal(t, "Paused schedule nightly.", act("schedule-pause", "nightly"))
	info, err = s.Get(ctx, "nightly")
	require.NoError(t, err)
	assert.True(t, info.Paused)
	assert.Equal(t, "Resumed schedule hourly.", act("schedule-resume", "hourly"))
	info, err = s.Get(ctx, "hourly")
	require.NoError(t, err)
	assert.False(t, info.Paused)
	assert.False(t, info.Next.IsZero())

	flash := act("schedule-trigger", "hourly")
	assert.True(t, strings.HasPrefix(flash, "Triggered schedule hourly: message hourly@"), flash)
	info, err = s.Get(ctx, "hourly")
	require.NoError(t, err)
	assert.Equal(t, int64(1), info.Fired)
	assert.False(t, info.LastFired.IsZero())
	page = e.get("schedules")
	assert.Contains(t, page, info.LastFired.UTC().Format("2006-01-02 15:04:05.000"), "the last firing")

	assert.Equal(t, "Removed schedule nightly.", act("schedule-remove", "nightly"))
	_, err = s.Get(ctx, "nightly")
	assert.ErrorIs(t, err, rmq.ErrScheduleNotFound)
	assert.NotContains(t, e.get("schedules"), `data-schedule="nightly"`)

	// The CSRF check is the actions' own.
	code, _, _ = e.do(http.MethodPost, "action", url.Values{"op": {"schedule-remove"}, "topic": {"reports"}, "id": {"hourly"}, "confirm": {"yes"}},
		map[string]string{"Origin": e.srv.URL})
	assert.Equal(t, http.StatusForbidden, code, "no token")
	code, _, _ = e.do(http.MethodPost, "action", url.Values{"op": {"schedule-remove"}, "topic": {"reports"}, "id": {"hourly"}, "confirm": {"yes"}, "csrf": {e.token()}},
		map[string]string{"Origin": "http://evil.example"})
	assert.Equal(t, http.StatusForbidden, code, "other origin")
	_, err = s.Get(ctx, "hourly")
	assert.NoError(t, err, "still there")
	// An unknown schedule is the library's error.
	code, _, _ = e.post(url.Values{"op": {"schedule-pause"}, "topic": {"reports"}, "id": {"nosuch"}, "confirm": {"yes"}})
	assert.Equal(t, http.StatusNotFound, code)

	ro := newEnvOn(t, e.rdb, dashboard.WithKeyPrefix(e.prefix), dashboard.WithReadOnly())
	page = ro.get("schedules")
	assert.Contains(t, page, `data-schedule="hourly"`)
	assert.NotContains(t, page, `method="post"`)
}
