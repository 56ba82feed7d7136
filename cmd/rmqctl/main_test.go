package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// TestMain runs the tests against the shared Redis, checks that no
// goroutine was left running, and removes the rmqctl binary built for
// them.
func TestMain(m *testing.M) {
	redistest.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if binDir != "" {
			os.RemoveAll(binDir)
		}
		os.Exit(code)
	}))
}

// The rmqctl binary, built once for every test that runs it.
var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// buildBinary compiles rmqctl, as a user would run it, once per test binary.
func buildBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "rmqctl-test-"); buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "rmqctl")
		var out []byte
		if out, buildErr = exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); buildErr != nil {
			buildErr = fmt.Errorf("go build: %w: %s", buildErr, out)
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

// ctl runs the binary against one Redis and prefix.
type ctl struct {
	t      *testing.T
	bin    string
	global []string
	env    []string // NAME=value, on top of the test's environment
}

type result struct {
	code           int
	stdout, stderr string
}

func (c ctl) run(stdin string, args ...string) result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, append(append([]string{}, c.global...), args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	// The variables that name a Redis come only from the test.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return name == "REDIS_URL" || name == "RMQ_REDIS" || name == "RMQ_CLUSTER"
	})
	cmd.Env = append(cmd.Env, c.env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(c.t, err)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// ok runs a command that must succeed and returns its stdout.
func (c ctl) ok(args ...string) string {
	c.t.Helper()
	r := c.run("", args...)
	require.Equal(c.t, 0, r.code, "rmqctl %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.stdout, r.stderr)
	return r.stdout
}

func (c ctl) json(v any, args ...string) {
	c.t.Helper()
	out := c.ok(append([]string{"-o", "json"}, args...)...)
	require.NoError(c.t, json.Unmarshal([]byte(out), v), out)
}

// columnsAligned checks that every line of a table starts each column of
// the header at the same offset.
func columnsAligned(t *testing.T, table string, columns ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
	require.NotEmpty(t, lines)
	header := lines[0]
	for _, col := range columns[1:] {
		at := strings.Index(header, col)
		require.Positive(t, at, "column %s in %q", col, header)
		for _, l := range lines[1:] {
			if l == "" {
				break // the table ended
			}
			require.Greater(t, len(l), at, "line %q", l)
			assert.Equal(t, byte(' '), l[at-1], "column %s not aligned in %q", col, l)
			assert.NotEqual(t, byte(' '), l[at], "column %s not aligned in %q", col, l)
		}
	}
}

// End to end: a real redis-server holds real dead messages (killed by a
// consumer with WithMaxRetries(0)) and waiting ones; the built binary lists,
// shows, pages, requeues, deletes and removes them, with the output and exit
// codes a user and a script rely on.
func TestRmqctlEndToEnd(t *testing.T) {
	bin := buildBinary(t)
	srv := redistest.Shared(t)
	rdb := redistest.Client(t, srv)
	prefix := redistest.Prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	orders := topic.MustNew("orders", topic.FixedTime, 4)
	jobs := topic.MustNew("jobs", topic.Priority, 2)
	c, err := rmq.New(rdb, rmq.WithPrefix(prefix), rmq.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	require.NoError(t, c.Register(orders, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
		return fmt.Errorf("cannot ship %s:\nwarehouse closed", m.ID)
	}), consumer.WithMaxRetries(0)))
	require.NoError(t, c.Start(ctx))
	p := c.Producer()
	bodies := map[string][]byte{
		"k1": []byte(`{"order":1}`), "k2": []byte(`{"order":2}`), "k3": []byte(`{"order":3}`),
		"k4": []byte("line one\nline two"), "k5": []byte("ünïcode ✓"), "bin": {0xff, 0x00, 0x01, 0x80},
	}
	insp := c.Inspector()
	// Each message is sent once the one before has died, so their times of
	// death are in the order of the list (sent together, two could die in
	// one fetch, in the same millisecond).
	for i, id := range []string{"k1", "k2", "k3", "k4", "k5", "bin"} {
		_, err := p.SendFixedTime(ctx, orders, bodies[id], time.Now(), producer.WithKey(id))
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			st, err := insp.Stats(ctx, orders)
			return err == nil && st.Dead == int64(i+1)
		}, 15*time.Second, 2*time.Millisecond)
	}
	require.NoError(t, c.Close(ctx))
	for j, prio := range []int64{40, 900, 300} {
		_, err := p.SendPriority(ctx, jobs, []byte(fmt.Sprintf("job %d", j)), prio, producer.WithKey(fmt.Sprintf("j%d", j)))
		require.NoError(t, err)
	}
	_, err = p.SendFixedTime(ctx, orders, []byte("later"), time.Now().Add(time.Hour), producer.WithKey("later"))
	require.NoError(t, err)

	r := ctl{t: t, bin: bin, global: []string{"--redis", srv.Addr(), "--prefix", prefix}}

	t.Run("topics", func(t *testing.T) {
		out := r.ok("topics")
		assert.Regexp(t, `(?m)^TOPIC\s+TYPE\s+SLOTS\s+WAITING\s+IN-FLIGHT\s+DEAD$`, out)
		assert.Regexp(t, `(?m)^jobs\s+priority\s+2\s+3\s+0\s+0$`, out)
		assert.Regexp(t, `(?m)^orders\s+fixedtime\s+4\s+1\s+0\s+6$`, out)
		columnsAligned(t, out, "TOPIC", "TYPE", "SLOTS", "WAITING", "IN-FLIGHT", "DEAD")
		var ts []topicJSON
		r.json(&ts, "topics")
		assert.Equal(t, []topicJSON{
			{Name: "jobs", Type: "priority", Slots: 2, Waiting: 3},
			{Name: "orders", Type: "fixedtime", Slots: 4, Waiting: 1, Dead: 6},
		}, ts)
	})

	t.Run("stats", func(t *testing.T) {
		out := r.ok("stats", "orders", "--slots")
		assert.Regexp(t, `(?m)^topic:\s+orders \(fixedtime, 4 slots\)$`, out)
		assert.Regexp(t, `(?m)^waiting:\s+1 \(0 due now\)$`, out)
		assert.Regexp(t, `(?m)^dead:\s+6$`, out)
		assert.Contains(t, out, "SLOT")
		var st statsJSON
		r.json(&st, "stats", "orders")
		assert.EqualValues(t, 6, st.Dead)
		assert.EqualValues(t, 1, st.Waiting)
		assert.Len(t, st.Slots, 4)
		assert.NotEmpty(t, st.NextDue)
		assert.NotEmpty(t, st.OldestDeath)
		out = r.ok("stats", "jobs")
		assert.Regexp(t, `(?m)^top priority:\s+900$`, out)
	})

	t.Run("dead list and paging", func(t *testing.T) {
		out := r.ok("dead", "list", "orders")
		columnsAligned(t, out, "ID", "SLOT", "ATTEMPTS", "DIED", "FIRST-SENT", "LAST-ERROR", "BODY")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 7, out)
		assert.True(t, strings.HasPrefix(lines[1], "bin "), "newest first:\n%s", out)
		assert.Contains(t, out, `base64:/wABgA==`)
		assert.Contains(t, out, `line one\nline two`)
		assert.Contains(t, out, `cannot ship k4:\nwarehouse closed`)
		assert.Contains(t, out, "ünïcode ✓")
		assert.NotContains(t, out, "next page")

		// Page by two through the JSON output, then through the table's hint.
		var ids []string
		cursor := ""
		for range 10 {
			var page deadPageJSON
			args := []string{"dead", "list", "orders", "--limit", "2"}
			if cursor != "" {
				args = append(args, "--cursor", cursor)
			}
			r.json(&page, args...)
			for _, m := range page.Messages {
				ids = append(ids, m.ID)
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		assert.Equal(t, []string{"bin", "k5", "k4", "k3", "k2", "k1"}, ids)
		out = r.ok("dead", "list", "orders", "--limit", "4")
		require.Contains(t, out, "next page: --cursor ")
		next := strings.TrimSpace(out[strings.LastIndex(out, "--cursor ")+len("--cursor "):])
		out = r.ok("dead", "list", "orders", "--cursor", next, "--limit", "4")
		lines = strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 3, out)
		assert.True(t, strings.HasPrefix(lines[1], "k2 ") && strings.HasPrefix(lines[2], "k1 "), out)

		bad := r.run("", "dead", "list", "orders", "--cursor", "nonsense")
		assert.Equal(t, 2, bad.code, bad.stderr)
	})

	t.Run("dead show", func(t *testing.T) {
		out := r.ok("dead", "show", "orders", "k4")
		assert.Regexp(t, `(?m)^id:\s+k4$`, out)
		assert.Regexp(t, `(?m)^attempts:\s+1$`, out)
		assert.Regexp(t, `(?m)^last error:\s+cannot ship k4:\\nwarehouse closed$`, out)
		assert.Contains(t, out, "body (text, 17 bytes):\nline one\nline two\n")
		out = r.ok("dead", "show", "orders", "bin")
		assert.Contains(t, out, "body (base64, 4 bytes):\n/wABgA==\n")

		var m deadJSON
		r.json(&m, "dead", "show", "orders", "bin")
		assert.Equal(t, "base64", m.BodyEncoding)
		raw, err := base64.StdEncoding.DecodeString(m.Body)
		require.NoError(t, err)
		assert.Equal(t, bodies["bin"], raw)
		assert.Equal(t, 1, m.Attempts)
		assert.Equal(t, "cannot ship bin:\nwarehouse closed", m.LastError)
		_, err = time.Parse(time.RFC3339, m.DiedAt)
		assert.NoError(t, err)
		r.json(&m, "dead", "show", "orders", "k5")
		assert.Equal(t, "text", m.BodyEncoding)
		assert.Equal(t, "ünïcode ✓", m.Body)

		miss := r.run("", "dead", "show", "orders", "nope")
		assert.Equal(t, 1, miss.code)
		assert.Contains(t, miss.stderr, "not found")
	})

	t.Run("dead requeue", func(t *testing.T) {
		// Two messages: confirmation asked; "n" (or no answer) changes nothing.
		for _, answer := range []string{"n\n", ""} {
			res := r.run(answer, "dead", "requeue", "orders", "k1", "k2")
			assert.Equal(t, 1, res.code)
			assert.Contains(t, res.stderr, "Requeue 2 dead messages of orders? [y/N]")
			assert.Contains(t, res.stderr, "aborted")
		}
		var st statsJSON
		r.json(&st, "stats", "orders")
		assert.EqualValues(t, 6, st.Dead)

		res := r.run("y\n", "dead", "requeue", "orders", "k1", "k2")
		require.Equal(t, 0, res.code, res.stderr)
		assert.Equal(t, "requeued 2 dead messages of orders\n", res.stdout)
		// One message: no question.
		assert.Equal(t, "requeued 1 dead message of orders\n", r.ok("dead", "requeue", "orders", "k3"))
		// An id that is not dead: exit 1 after doing the rest.
		var cnt countJSON
		res = r.run("", "-o", "json", "dead", "requeue", "orders", "k4", "k1", "--yes")
		assert.Equal(t, 1, res.code)
		require.NoError(t, json.Unmarshal([]byte(res.stdout), &cnt))
		assert.Equal(t, 2, cnt.Requested)
		require.NotNil(t, cnt.Requeued)
		assert.Equal(t, 1, *cnt.Requeued)
		assert.Contains(t, res.stderr, "1 of the 2 ids named were not in the dead queue")

		var waiting []waitingJSON
		r.json(&waiting, "peek", "orders")
		var got []string
		for _, w := range waiting {
			got = append(got, w.ID)
			if w.ID != "later" {
				assert.Zero(t, w.Attempts, w.ID)
				assert.Empty(t, w.LastError, w.ID)
			}
		}
		assert.ElementsMatch(t, []string{"k1", "k2", "k3", "k4", "later"}, got)
		assert.Equal(t, "later", got[len(got)-1], "due in an hour, after the requeued ones")
	})

	t.Run("peek", func(t *testing.T) {
		out := r.ok("peek", "jobs", "--limit", "2")
		columnsAligned(t, out, "ID", "SLOT", "PRIORITY", "ATTEMPTS", "IN-FLIGHT", "LAST-ERROR", "BODY")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 3, out)
		assert.Regexp(t, `^j1\s+\d\s+900\s`, lines[1])
		assert.Regexp(t, `^j2\s+\d\s+300\s`, lines[2])
	})

	t.Run("remove", func(t *testing.T) {
		assert.Equal(t, "removed later from orders\n", r.ok("remove", "orders", "later"))
		res := r.run("", "remove", "orders", "later")
		assert.Equal(t, 1, res.code)
		assert.Contains(t, res.stderr, `no waiting message "later"`)
	})

	t.Run("dead delete", func(t *testing.T) {
		res := r.run("no\n", "dead", "delete", "orders", "--all")
		assert.Equal(t, 1, res.code)
		assert.Contains(t, res.stderr, "Delete all 2 dead messages of orders? [y/N]")
		out := r.ok("dead", "delete", "orders", "--all", "--yes")
		assert.Equal(t, "deleted 2 dead messages of orders\n", out)
		var st statsJSON
		r.json(&st, "stats", "orders")
		assert.Zero(t, st.Dead)
		assert.EqualValues(t, 4, st.Waiting)
		var page deadPageJSON
		r.json(&page, "dead", "list", "orders")
		assert.NotNil(t, page.Messages)
		assert.Empty(t, page.Messages)
		assert.Empty(t, page.NextCursor)
	})

	t.Run("usage errors exit 2", func(t *testing.T) {
		for _, args := range [][]string{
			{},
			{"bogus"},
			{"dead"},
			{"dead", "bogus"},
			{"dead", "list"},
			{"dead", "list", "orders", "extra"},
			{"dead", "list", "orders", "--limit", "x"},
			{"dead", "list", "orders", "--limit", "0"},
			{"dead", "show", "orders"},
			{"dead", "requeue", "orders"},
			{"dead", "requeue", "orders", "k1", "--all"},
			{"dead", "delete"},
			{"peek"},
			{"peek", "orders", "--bogus"},
			{"remove", "orders"},
			{"stats"},
			{"-o", "yaml", "topics"},
			{"--cluster", "127.0.0.1:1", "topics"}, // with --redis from r.global
			{"--bogus", "topics"},
			{"help", "bogus"},
		} {
			res := r.run("", args...)
			assert.Equal(t, 2, res.code, "rmqctl %v: %s", args, res.stderr)
			assert.Contains(t, res.stderr, "Run 'rmqctl help", "rmqctl %v", args)
			assert.Empty(t, res.stdout, "rmqctl %v", args)
		}
	})

	t.Run("errors exit 1", func(t *testing.T) {
		res := r.run("", "stats", "nope")
		assert.Equal(t, 1, res.code)
		assert.Contains(t, res.stderr, `unknown topic "nope"`)
		down := ctl{t: t, bin: bin, global: []string{"--redis", "127.0.0.1:1"}}
		res = down.run("", "topics")
		assert.Equal(t, 1, res.code)
		assert.Contains(t, res.stderr, "connect to Redis at 127.0.0.1:1")
	})

	t.Run("help for every command", func(t *testing.T) {
		out := r.ok("help")
		for _, c := range commands {
			assert.Contains(t, out, c.name)
			for _, how := range [][]string{append([]string{"help"}, strings.Fields(c.name)...), append(strings.Fields(c.name), "-h"), append(strings.Fields(c.name), "--help")} {
				if c.name == "help" && how[len(how)-1] != "help" {
					continue
				}
				got := r.ok(how...)
				assert.Equal(t, c.help, got, "rmqctl %v", how)
				assert.True(t, strings.HasPrefix(got, "Usage:"), "rmqctl %v", how)
			}
		}
		assert.Equal(t, deadHelp, r.ok("help", "dead"))
		assert.Equal(t, globalHelp, r.ok("--help"))
		assert.Equal(t, globalHelp, r.ok("-h"))
	})
}

// The same binary against a Redis Cluster (--cluster): messages spread over
// the nodes; dead ones are made with the consumer's fetch and rollback
// scripts.
func TestRmqctlCluster(t *testing.T) {
	bin := buildBinary(t)
	cl := redistest.SharedCluster(t)
	cc := redistest.ClusterClient(t, cl)
	prefix := redistest.Prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tp := topic.MustNew("cl", topic.FixedTime, 8)
	p := rmqtest.Producer(t, cc, prefix)
	for j := range 12 {
		_, err := p.SendFixedTime(ctx, tp, []byte(fmt.Sprintf("body %d", j)), time.Now().Add(-time.Second), producer.WithKey(fmt.Sprintf("c%02d", j)))
		require.NoError(t, err)
	}
	for s := range tp.SlotAmount() {
		k := keyspace.KeysFor(prefix, tp, s)
		keys, fargs := scripts.FetchCall{TimeBased: true, N: 64, LeaseSec: 30, Window: 128,
			Groups: []scripts.FetchGroup{{Store: k.Store, Prepare: k.Prepare, Msg: k.Msg, Max: 64}}}.Args()
		vals, err := scripts.Fetch.Run(ctx, cc, keys, fargs...).Slice()
		require.NoError(t, err)
		r, err := scripts.ParseFetchReply(vals)
		require.NoError(t, err)
		args := []any{"SPUBLISH", 0, 0, 0, 0}
		for _, m := range r.Msgs {
			args = append(args, m.ID, m.Token, "failed on the cluster", "")
		}
		if len(args) > 5 {
			require.NoError(t, scripts.Rollback.Run(ctx, cc, []string{k.Store, k.Prepare, k.Msg, k.Dead, k.DeadMsg, k.Wake, k.Delayed}, args...).Err())
		}
	}
	_, err := p.SendFixedTime(ctx, tp, []byte("waiting"), time.Now().Add(time.Hour), producer.WithKey("w"))
	require.NoError(t, err)

	r := ctl{t: t, bin: bin, global: []string{"--cluster", strings.Join(cl.Addrs(), ","), "--prefix", prefix}}
	assert.Regexp(t, `(?m)^cl\s+fixedtime\s+8\s+1\s+0\s+12$`, r.ok("topics"))
	var page deadPageJSON
	r.json(&page, "dead", "list", "cl", "--limit", "100")
	assert.Len(t, page.Messages, 12)
	assert.Contains(t, r.ok("dead", "show", "cl", "c03"), "failed on the cluster")
	assert.Equal(t, "requeued 12 dead messages of cl\n", r.ok("dead", "requeue", "cl", "--all", "--yes"))
	var waiting []waitingJSON
	r.json(&waiting, "peek", "cl", "--limit", "100")
	assert.Len(t, waiting, 13)
	for _, w := range waiting {
		r.ok("remove", "cl", w.ID)
	}
	assert.Regexp(t, `(?m)^cl\s+fixedtime\s+8\s+0\s+0\s+0$`, r.ok("topics"))
}
