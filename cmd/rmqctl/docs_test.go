package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

// The connection forms of docs/operations.md (the block marked
// rmqctl-connect) work as written, each run through bash with the
// placeholders filled in: USER:PASSWORD an ACL user of real servers, HOST:PORT
// a plain one, or for rediss:// a TLS one (ca.pem its CA), HOST1:PORT… the
// nodes of a real cluster, COMMAND topics. The test rigs start no cluster
// with TLS, so the one line that needs both is resolved (URL, seeds, user,
// TLS) as rmqctl resolves it before dialling, and not run.
func TestDocsRmqctlConnectForms(t *testing.T) {
	root, err := readmetest.Root()
	require.NoError(t, err)
	page, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	require.NoError(t, err)
	fences, err := readmetest.Fences(page, readmetest.DocMarker)
	require.NoError(t, err)
	var block *readmetest.Fence
	for _, f := range fences {
		if f.Name == "rmqctl-connect" {
			require.Nil(t, block, "one block marked rmqctl-connect")
			block = &f
		}
	}
	require.NotNil(t, block, "docs/operations.md's block marked rmqctl-connect")

	bin := buildBinary(t)
	const user, pw = "rmq", "s3cret"
	acl := []string{"user " + user + " on >" + pw + " ~* &* +@all"}
	plain := redistest.Start(t, redisserver.Config{ACL: acl})
	files := redistest.TLSFiles(t)
	tls := redistest.Start(t, redisserver.Config{ACL: acl, TLS: &files})
	cluster := redistest.SharedCluster(t)
	sendWaiting(t, redistest.Client(t, plain), 2)
	tc, err := files.ClientConfig()
	require.NoError(t, err)
	sendWaiting(t, redistest.Client(t, tls, func(o *redis.Options) { o.Username, o.Password, o.TLSConfig = user, pw, tc }), 3)
	nodes := cluster.Addrs()

	ran := 0
	for i, line := range strings.Split(strings.TrimSuffix(block.Text, "\n"), "\n") {
		at := fmt.Sprintf("docs/operations.md:%d", block.Line+1+i)
		line, _, _ = strings.Cut(line, "#")
		line = strings.TrimSpace(line)
		host, waiting := plain.Addr(), 2
		if strings.Contains(line, "rediss://") {
			host, waiting = tls.Addr(), 3
		}
		filled := strings.NewReplacer(
			"USER:PASSWORD", user+":"+pw,
			"HOST1:PORT", nodes[0], "HOST2:PORT", nodes[1], "HOST3:PORT", nodes[2],
			"HOST:PORT/DB", host+"/0", "HOST:PORT", host,
			"ca.pem", files.CAFile, "COMMAND", "topics").Replace(line)
		if strings.Contains(line, "--cluster") && strings.Contains(line, "rediss://") {
			seeds := regexp.MustCompile(`--cluster '([^']+)'`).FindStringSubmatch(filled)
			require.NotNil(t, seeds, "%s: --cluster 'URL'", at)
			f := connFlags{cluster: seeds[1], tlsCA: files.CAFile, set: map[string]bool{"cluster": true, "tls-ca": true}}
			tg, err := f.resolveTarget(func(string) string { return "" })
			require.NoError(t, err, "%s", at)
			require.NotNil(t, tg.cluster, "%s", at)
			assert.Equal(t, nodes[:3], tg.cluster.Addrs, "%s", at)
			assert.Equal(t, user, tg.cluster.Username, "%s", at)
			assert.Equal(t, pw, tg.cluster.Password, "%s", at)
			assert.NotNil(t, tg.cluster.TLSConfig, "%s", at)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-c", filled)
		cmd.Env = append(readmetest.WithoutRedisVars(os.Environ()), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		cancel()
		require.NoError(t, err, "%s: %s\n%s", at, filled, out)
		if strings.Contains(line, "--cluster") {
			assert.Regexp(t, `(?m)^TOPIC\s+TYPE`, string(out), "%s", at)
		} else {
			assert.Regexp(t, fmt.Sprintf(connTopicRow, waiting), string(out), "%s: %s", at, filled)
		}
		ran++
	}
	require.Equal(t, 5, ran, "lines run against real servers")
}
