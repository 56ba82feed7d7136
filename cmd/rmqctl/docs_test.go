package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/readmetest"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// isoTime is a time as rmqctl prints it; the docs' session shows the
// times of its own run, which differ from any other.
var isoTime = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`)

// The rmqctl blocks of docs/operations.md run as written: the sh block
// builds rmqctl from the repository's root (into a temporary directory
// rather than the root), and the $ session runs with that binary against
// a real redis-server, through REDIS_URL, holding the messages the session
// shows: topic orders (fixed-time, 8 slots) with three messages that died
// after two attempts, newest first, and two waiting an hour. Each command
// prints what the page shows, but for the times.
func TestDocsRmqctlSession(t *testing.T) {
	root, err := readmetest.Root()
	require.NoError(t, err)
	page, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	require.NoError(t, err)
	fences, err := readmetest.Fences(page, readmetest.DocMarker)
	require.NoError(t, err)
	var build, session []readmetest.Fence
	for _, f := range fences {
		switch {
		case f.Name == "rmqctl" && f.Lang == "sh":
			build = append(build, f)
		case f.Name == "rmqctl" && f.Lang == "console":
			session = append(session, f)
		case f.Name == "rmqctl":
			t.Fatalf("docs/operations.md:%d: an rmqctl block is sh (commands) or console (a session)", f.Line)
		}
	}
	require.Len(t, build, 1, "the block that builds rmqctl")
	require.NotEmpty(t, session, "the $ sessions")

	// Build as the page says, from the root.
	dir := t.TempDir()
	for _, line := range strings.Split(strings.TrimSpace(build[0].Text), "\n") {
		line, _, _ = strings.Cut(line, "#")
		line = strings.TrimSpace(line)
		require.True(t, strings.HasPrefix(line, "go build -o rmqctl "), "docs/operations.md:%d: %q", build[0].Line, line)
		args := strings.Fields(strings.Replace(line, "-o rmqctl", "-o "+filepath.Join(dir, "rmqctl"), 1))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		cancel()
		require.NoError(t, err, "%s:\n%s", line, out)
	}

	srv := redistest.Start(t, redisserver.Config{})
	docsSessionData(t, redistest.Client(t, srv))

	env := append(readmetest.WithoutRedisVars(os.Environ()), "REDIS_URL=redis://"+srv.Addr()+"/0")
	for i, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			env[i] = "PATH=" + dir + string(os.PathListSeparator) + v
		}
	}
	ran := 0
	for _, f := range session {
		for _, c := range dollarCommands(f.Text) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			cmd := exec.CommandContext(ctx, "bash", "-c", c.line)
			cmd.Env = env
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			cancel()
			require.NoError(t, err, "docs/operations.md:%d: $ %s\n%s", c.at+f.Line, c.line, &stderr)
			want := readmetest.Lines(isoTime.ReplaceAllString(strings.Join(c.want, "\n"), "…"))
			got := readmetest.Lines(stdout.String())
			require.NoError(t, readmetest.Match(want, got), "docs/operations.md:%d: $ %s printed:\n%s", c.at+f.Line, c.line, &stdout)
			ran++
		}
	}
	t.Logf("%d rmqctl commands of docs/operations.md ran as shown", ran)
}

// docsSessionData makes what the session shows: three dead messages of
// orders, each sent once the one before has died (so they died in this
// order) and failed twice, and two waiting for an hour.
func docsSessionData(t *testing.T, rdb redis.UniversalClient) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	orders := topic.MustNew("orders", topic.FixedTime, 8)
	c, err := rmq.New(rdb, rmq.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	require.NoError(t, c.Register(orders, consumer.ListenerFunc(func(context.Context, *consumer.Message) error {
		return errors.New("payment service unavailable")
	}), consumer.WithMaxRetries(1), consumer.WithRetryBackoff(func(int) time.Duration { return 0 })))
	require.NoError(t, c.Start(ctx))
	p := c.Producer()
	insp := c.Inspector()
	for i, id := range []string{"order-1001", "order-1002", "order-1003"} {
		_, err := p.SendFixedTime(ctx, orders, []byte(`{"order":`+strings.TrimPrefix(id, "order-")+`}`), time.Now(), producer.WithKey(id))
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			st, err := insp.Stats(ctx, orders)
			return err == nil && st.Dead == int64(i+1)
		}, 15*time.Second, 2*time.Millisecond)
	}
	require.NoError(t, c.Close(ctx))
	later := time.Now().Add(time.Hour)
	for id, body := range map[string][]byte{"binary-1": {0xff, 0x00, 'x'}, "order-2001": []byte(`{"order":2001}`)} {
		_, err := p.SendFixedTime(ctx, orders, body, later, producer.WithKey(id))
		require.NoError(t, err)
	}
}

// dollarCommand is a "$ " line of a console block and the lines it prints.
type dollarCommand struct {
	line string
	at   int // lines after the fence
	want []string
}

// dollarCommands splits a console session: each "$ " line is a command,
// the lines up to the next one (without the blank lines before it) what it
// prints.
func dollarCommands(text string) []dollarCommand {
	var out []dollarCommand
	for i, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if c, ok := strings.CutPrefix(l, "$ "); ok {
			out = append(out, dollarCommand{line: c, at: i + 1})
			continue
		}
		if len(out) > 0 {
			out[len(out)-1].want = append(out[len(out)-1].want, l)
		}
	}
	for i := range out {
		w := out[i].want
		for len(w) > 0 && strings.TrimSpace(w[len(w)-1]) == "" {
			w = w[:len(w)-1]
		}
		out[i].want = w
	}
	return out
}

// Every command `rmqctl help` lists is named in docs/operations.md's list
// of commands.
func TestDocsNameEveryRmqctlCommand(t *testing.T) {
	root, err := readmetest.Root()
	require.NoError(t, err)
	page, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	require.NoError(t, err)
	list := string(page)
	start := strings.Index(list, "\nCommands: ")
	require.Positive(t, start, "docs/operations.md has a Commands: paragraph")
	list = list[start:]
	list = strings.Join(strings.Fields(list[:strings.Index(list, "\n\n")]), " ") // one line, for commands cut by a line break

	r := ctl{t: t, bin: buildBinary(t)}
	help := r.ok("help")
	cmds := regexp.MustCompile(`(?m)^  ([a-z]+(?: [a-z]+)?)  +\S`).FindAllStringSubmatch(help[strings.Index(help, "Commands:"):strings.Index(help, "Global flags:")], -1)
	require.Greater(t, len(cmds), 10, "commands in:\n%s", help)
	for _, c := range cmds {
		assert.Contains(t, list, "`"+c[1], "docs/operations.md's Commands: names %q", c[1])
	}
}
