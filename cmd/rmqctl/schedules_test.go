package main

import (
	"context"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/topicstore"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// The schedules commands, end to end with the built binary: set (with a
// body file and a time zone), list, get, pause, resume, trigger, remove,
// and the exit codes of bad input. No client runs: the pending tick is
// what Set sent.
func TestRmqctlSchedules(t *testing.T) {
	bin := buildBinary(t)
	srv := redistest.Shared(t)
	rdb := redistest.Client(t, srv)
	prefix := redistest.Prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reports := topic.MustNew("reports", topic.FixedTime, 2)
	merge := topic.MustNew("merge", topic.RangeMerge, 1)
	insp := rmq.NewInspector(rdb, rmq.WithPrefix(prefix))
	for _, tp := range []topic.Topic{reports, merge} {
		require.NoError(t, topicstore.Define(ctx, rdb, keyspace.TopicsKey(prefix), tp))
	}
	c := ctl{t: t, bin: bin, global: []string{"--redis", srv.Addr(), "--prefix", prefix}}

	bodyFile := filepath.Join(t.TempDir(), "body.json")
	require.NoError(t, os.WriteFile(bodyFile, []byte(`{"report":"daily"}`), 0o600))
	out := c.ok("schedules", "set", "nightly", "--spec", "30 2 * * *", "--topic", "reports", "--body-file", bodyFile,
		"--tz", "Europe/Berlin", "--catch-up", "1h", "--header", "team=bi")
	assert.Contains(t, out, "set nightly: next tick ")
	c.ok("schedules", "set", "beat", "--spec", "@every 1h", "--topic", "reports", "--body", "b", "--paused")

	var list []scheduleJSON
	c.json(&list, "schedules", "list")
	require.Len(t, list, 2)
	assert.Equal(t, "beat", list[0].Name)
	assert.True(t, list[0].Paused)
	assert.Empty(t, list[0].Next)
	n := list[1]
	assert.Equal(t, "nightly", n.Name)
	assert.Equal(t, "Europe/Berlin", n.TimeZone)
	assert.Equal(t, "1h0m0s", n.CatchUp)
	berlin, _ := time.LoadLocation("Europe/Berlin")
	want, err := rmq.NextTicks("30 2 * * *", berlin, time.Now(), 1)
	require.NoError(t, err)
	next, err := time.Parse(time.RFC3339, n.Next)
	require.NoError(t, err)
	assert.True(t, want[0].Equal(next), "next %s, want %v", n.Next, want[0])

	table := c.ok("schedules", "list")
	columnsAligned(t, table, "NAME", "SPEC", "TZ", "TOPIC", "STATE", "NEXT", "LAST", "FIRED", "SKIPPED")
	assert.Contains(t, table, "paused")

	var got scheduleJSON
	c.json(&got, "schedules", "get", "nightly")
	assert.Equal(t, `{"report":"daily"}`, got.Body)
	assert.Equal(t, map[string]string{"team": "bi"}, got.Headers)

	assert.Equal(t, "paused nightly\n", c.ok("schedules", "pause", "nightly"))
	c.json(&got, "schedules", "get", "nightly")
	assert.True(t, got.Paused)
	assert.Equal(t, "resumed nightly\n", c.ok("schedules", "resume", "nightly"))
	c.json(&got, "schedules", "get", "nightly")
	assert.False(t, got.Paused)
	assert.NotEmpty(t, got.Next)

	out = c.ok("schedules", "trigger", "beat")
	assert.True(t, strings.HasPrefix(out, "triggered beat: message beat@"), out)
	st, err := insp.Stats(ctx, reports)
	require.NoError(t, err)
	assert.Equal(t, int64(2), st.Store, "the trigger and nightly's pending tick")

	assert.Equal(t, "removed beat\n", c.ok("schedules", "remove", "beat"))
	c.json(&list, "schedules", "list")
	assert.Len(t, list, 1)

	for _, bad := range []struct {
		code int
		args []string
		msg  string
	}{
		{1, []string{"schedules", "get", "beat"}, `no schedule "beat"`},
		{1, []string{"schedules", "pause", "beat"}, `no schedule "beat"`},
		{1, []string{"schedules", "set", "x", "--spec", "61 * * * *", "--topic", "reports", "--body", "b"}, "invalid schedule"},
		{1, []string{"schedules", "set", "x", "--spec", "@hourly", "--topic", "merge", "--body", "b"}, "range-merge"},
		{1, []string{"schedules", "set", "x", "--spec", "@hourly", "--topic", "nope", "--body", "b"}, "unknown topic"},
		{2, []string{"schedules", "set", "x", "--spec", "@hourly", "--topic", "reports"}, "--body"},
		{2, []string{"schedules", "set", "x", "--topic", "reports", "--body", "b"}, "--spec"},
		{2, []string{"schedules", "set", "x", "--spec", "@hourly", "--topic", "reports", "--body", "b", "--tz", "Mars/Base"}, "--tz"},
		{2, []string{"schedules", "frobnicate"}, "subcommand"},
		{2, []string{"schedules", "get"}, "missing NAME"},
	} {
		r := c.run("", bad.args...)
		assert.Equal(t, bad.code, r.code, "%v: %s", bad.args, r.stderr)
		assert.Contains(t, r.stderr, bad.msg, "%v", bad.args)
	}
	c.json(&list, "schedules", "list")
	assert.Len(t, list, 1, "bad input wrote nothing")
}

// Schedules under the least-privilege ACL rule: a client that schedules and
// consumes, Set, Pause, Resume, Trigger, Remove and rmqctl's listing, with
// not one command, key or channel refused.
func TestSchedulesLeastPrivilegeACL(t *testing.T) {
	bin := buildBinary(t)
	srv := redistest.Start(t, redisserver.Config{
		ACL: []string{
			"user default off",
			"user " + aclUser + " on >" + aclPassword + " " + aclRule,
			"user admin on >admin ~* &* +@all",
		},
		PingUser: "admin", PingPassword: "admin",
	})
	admin := redistest.Client(t, srv, func(o *redis.Options) { o.Username, o.Password = "admin", "admin" })
	rdb := redistest.Client(t, srv, func(o *redis.Options) { o.Username, o.Password = aclUser, aclPassword })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var logs logSink
	c, err := rmq.New(rdb, rmq.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	require.NoError(t, err)
	beats := topic.MustNew("beats", topic.FixedTime, 2)
	got := make(chan string, 16)
	require.NoError(t, c.Register(beats, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
		got <- m.ID
		return nil
	})))
	require.NoError(t, c.Start(ctx))
	defer func() { require.NoError(t, c.Close(ctx)) }()
	s := c.Schedules()
	require.NoError(t, s.Set(ctx, rmq.Schedule{Name: "beat", Spec: "@every 1s", Topic: beats, Body: []byte("b")}))
	for range 2 { // the first tick, and one the scheduler rolled
		select {
		case id := <-got:
			assert.True(t, strings.HasPrefix(id, "beat@"), id)
		case <-time.After(15 * time.Second):
			t.Fatal("no tick")
		}
	}
	require.NoError(t, s.Pause(ctx, "beat"))
	require.NoError(t, s.Resume(ctx, "beat"))
	_, err = s.Trigger(ctx, "beat")
	require.NoError(t, err)
	u := (&url.URL{Scheme: "redis", User: url.UserPassword(aclUser, aclPassword), Host: srv.Addr()}).String()
	out := ctl{t: t, bin: bin, env: []string{"REDIS_URL=" + u}}.ok("schedules", "list")
	assert.Contains(t, out, "beat")
	require.NoError(t, s.Remove(ctx, "beat"))
	entries, err := admin.Do(ctx, "ACL", "LOG").Slice()
	require.NoError(t, err)
	assert.Empty(t, entries, "refused under the ACL rule")
	assert.Empty(t, logs.String())
}
