package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/producer"
)

var eventLine = regexp.MustCompile(`^(\S+)  (\S+)\s*  (\S+)  (\d+)  (\S+)  '(e1[^']*)'$`)

// lines splits output into its lines.
func lines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }

// rmqctl events prints what the log holds and exits at its end, however
// idle the topic is (no timeout decides it); --after resumes after an
// event's cursor; -o json gives one object a line; a bad cursor is a usage
// error; --follow goes on with new events until interrupted.
func TestRmqctlEvents(t *testing.T) {
	e := newLifeEnv(t, "feed")
	r := e.r
	e.send("a", "b", "c", "d")

	note := r.run("", "events", "feed")
	assert.Equal(t, 0, note.code, note.stderr)
	assert.Empty(t, note.stdout)
	assert.Contains(t, note.stderr, "keeps no event log")

	r.ok("lifecycle", "feed", "--events", "100")
	assert.Empty(t, r.ok("events", "feed"), "an empty log: nothing, and the command ends")
	for _, id := range []string{"a", "b", "c"} {
		r.ok("cancel", "feed", id)
	}
	out := lines(r.ok("events", "feed"))
	require.Len(t, out, 3, "%q", out)
	var ids, cursors []string
	for _, l := range out {
		m := eventLine.FindStringSubmatch(l)
		require.NotNil(t, m, "line %q", l)
		assert.Equal(t, "cancelled", m[2])
		assert.Equal(t, "-", m[5])
		_, err := time.Parse(time.RFC3339, m[1])
		assert.NoError(t, err)
		ids, cursors = append(ids, m[3]), append(cursors, m[6])
	}
	assert.ElementsMatch(t, []string{"a", "b", "c"}, ids)

	rest := lines(r.ok("events", "feed", "--after", cursors[0]))
	require.Len(t, rest, 2, "%q", rest)
	assert.Equal(t, out[1:], rest)
	assert.Empty(t, r.ok("events", "feed", "--after", cursors[2]))

	var evs []eventJSON
	for _, l := range lines(r.ok("-o", "json", "events", "feed")) {
		var ev eventJSON
		require.NoError(t, json.Unmarshal([]byte(l), &ev), "line %q", l)
		evs = append(evs, ev)
	}
	require.Len(t, evs, 3)
	assert.Equal(t, cursors[2], evs[2].Cursor)
	assert.Equal(t, "cancelled", evs[0].Type)

	for _, bad := range []string{"e1 99=1-0", "nonsense", ""} {
		res := r.run("", "events", "feed", "--after", bad)
		assert.Equal(t, 2, res.code, "--after %q: %s", bad, res.stderr)
	}
	res := r.run("", "events", "feed", "--after", "now")
	assert.Equal(t, 2, res.code, res.stderr)

	// --follow prints the three kept events, then d's cancel as it is
	// recorded, and ends with exit 0 on SIGINT.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.bin, append(append([]string{}, r.global...), "events", "feed", "--follow")...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(stdout)
	var got []string
	for len(got) < 3 && sc.Scan() {
		got = append(got, sc.Text())
	}
	assert.Equal(t, out, got)
	r.ok("cancel", "feed", "d")
	require.True(t, sc.Scan(), "no fourth line")
	m := eventLine.FindStringSubmatch(sc.Text())
	require.NotNil(t, m, "line %q", sc.Text())
	assert.Equal(t, []string{"cancelled", "d"}, []string{m[2], m[3]})
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	assert.NoError(t, cmd.Wait(), "stderr: %s", errb.String())
}

// rmqctl events without --follow ends while events go on being recorded:
// it stops at the ends the logs had when it started, so it prints at least
// what was recorded before and nothing recorded after it ended.
func TestRmqctlEventsEndsUnderWrites(t *testing.T) {
	e := newLifeEnv(t, "busy")
	r := e.r
	e.send("first")
	r.ok("lifecycle", "busy", "--events", "100000")
	r.ok("cancel", "busy", "first")
	ctx, cancel := context.WithCancel(context.Background())
	insp := e.c.Inspector()
	var written atomic.Int64
	written.Store(1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			id := fmt.Sprintf("m%d", i)
			// Not e.send: no require off the test's goroutine.
			if _, err := e.c.Producer().SendFixedTime(ctx, e.tp, []byte(id), time.Now().Add(time.Hour), producer.WithKey(id)); err != nil {
				continue
			}
			if ok, err := insp.Cancel(ctx, e.tp, id); err == nil && ok {
				written.Add(1)
			}
		}
	}()
	// Let the writer get going: the command must start among writes.
	require.Eventually(t, func() bool { return written.Load() >= 20 }, 20*time.Second, time.Millisecond)
	res := r.run("", "events", "busy")
	after := written.Load()
	cancel()
	<-done
	require.Equal(t, 0, res.code, res.stderr)
	got := int64(len(lines(res.stdout)))
	assert.GreaterOrEqual(t, got, int64(20))
	assert.LessOrEqual(t, got, after)
}
