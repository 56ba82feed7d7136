package main

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/procutil"
	"github.com/rmq-go/rmq/internal/testkit/readmetest"
)

// The README's rmqd session runs as written against `rmqd --dev`: the
// banner it shows, the curl commands in order with the answers it shows
// (status codes and JSON), the dashboard at the banner's URL, and rmqctl
// pointed at the dev server's Redis by the banner's REDIS_URL line. Only
// the listeners' ports differ: the test picks free ones.
func TestReadmeSession(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq", "date"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "the README's session needs %s (scripts/test.sh installs it)", tool)
	}
	root, err := readmetest.Root()
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	banners, err := readmetest.Blocks(readme, "rmqd-banner")
	require.NoError(t, err)
	require.Len(t, banners, 1, "one block marked rmqd-banner")
	curlBlocks, err := readmetest.Blocks(readme, "rmqd")
	require.NoError(t, err)
	require.NotEmpty(t, curlBlocks, "blocks marked rmqd")
	ctlBlocks, err := readmetest.Blocks(readme, "rmqctl")
	require.NoError(t, err)
	require.NotEmpty(t, ctlBlocks, "blocks marked rmqctl")

	d := startDevRmqd(t)

	// The banner is the README's, but for the ports.
	readmeRedisPort := regexp.MustCompile(`redis://127\.0\.0\.1:(\d+)/0`).FindStringSubmatch(banners[0].Text)
	require.NotNil(t, readmeRedisPort, "the README's banner names a Redis URL")
	shown := strings.NewReplacer(d.api, "127.0.0.1:7777", d.admin, "127.0.0.1:7778",
		d.redisAddr, "127.0.0.1:"+readmeRedisPort[1]).Replace(strings.Join(d.banner, "\n"))
	require.NoError(t, readmetest.Match(readmetest.Lines(banners[0].Text), readmetest.Lines(shown)), "the banner:\n%s", shown)

	// The curl session, every rmqd block in order as one shell session.
	addrs := strings.NewReplacer("127.0.0.1:7777", d.api, "127.0.0.1:7778", d.admin)
	runSession(t, "rmqd", curlBlocks, addrs, t.TempDir(), nil, 3*time.Minute)

	// The dashboard at the banner's URL shows the session's queues.
	a := do(t, "GET", d.dashboardURL, "")
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	require.Contains(t, string(a.body), "shop.orders")

	// rmqctl from the repository's root, with the banner's REDIS_URL; go
	// run builds it, which may take minutes on a loaded machine.
	runSession(t, "rmqctl", ctlBlocks, addrs, root, []string{"REDIS_URL=" + d.redisURL}, 10*time.Minute)
	// The requeue took the dead job back: it waits again.
	a = do(t, "GET", "http://"+d.admin+"/queue/shop/orders", "")
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	require.JSONEq(t, `{"namespace":"shop","queue":"orders","type":"fixedtime","ready":1,"delayed":0,"in_flight":0,"dead":0,"paused":false}`, string(a.body))

	// SIGTERM stops rmqd and, with it, the throwaway Redis.
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-d.done:
	case <-time.After(2 * waitLong):
		t.Fatalf("rmqd --dev did not stop within %v of SIGTERM", 2*waitLong)
	}
	require.Equal(t, 0, d.cmd.ProcessState.ExitCode(), "%s", d.log)
	_, err = net.DialTimeout("tcp", d.redisAddr, time.Second)
	require.Error(t, err, "the --dev redis-server is gone with rmqd")
}

// devRmqd is a running `rmqd --dev` and what its banner said.
type devRmqd struct {
	cmd                    *exec.Cmd
	done                   chan struct{} // closed when the process has ended and its output is read
	log                    *syncBuffer   // stderr
	banner                 []string
	api, admin             string // host:port
	dashboardURL, redisURL string
	redisAddr              string
}

// startDevRmqd starts the binary with --dev on free ports and waits for
// its banner, which it prints once both listeners accept.
func startDevRmqd(t *testing.T) *devRmqd {
	t.Helper()
	apiPort, err := procutil.FreePort()
	require.NoError(t, err)
	adminPort, err := procutil.FreePort()
	require.NoError(t, err)
	d := &devRmqd{done: make(chan struct{}), log: &syncBuffer{}}
	d.cmd = exec.Command(rmqdBinary(t), "--dev",
		"--listen", net.JoinHostPort("127.0.0.1", strconv.Itoa(apiPort)),
		"--admin-listen", net.JoinHostPort("127.0.0.1", strconv.Itoa(adminPort)))
	d.cmd.Env = readmetest.WithoutRedisVars(os.Environ())
	d.cmd.Stderr = d.log
	stdout, err := d.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, d.cmd.Start())

	// Buffered: rmqd prints nothing after the banner, and whatever it
	// might print must not block it.
	lines := make(chan string, 64)
	go func() {
		// Owned by the test: it ends when the process closes its stdout,
		// and done tells the cleanup both have ended.
		defer close(d.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_ = d.cmd.Wait()
	}()
	t.Cleanup(func() {
		select {
		case <-d.done:
		default:
			_ = d.cmd.Process.Kill()
			for range lines { // let the reader finish
			}
			<-d.done
		}
		if t.Failed() {
			t.Logf("rmqd --dev stderr:\n%s", d.log)
		}
	})

	deadline := time.After(4 * waitLong)
	for d.redisURL == "" {
		select {
		case line, ok := <-lines:
			require.True(t, ok, "rmqd --dev ended before its banner:\n%s\n%s", strings.Join(d.banner, "\n"), d.log)
			d.banner = append(d.banner, line)
			if v, ok := strings.CutPrefix(line, "  export REDIS_URL="); ok {
				d.redisURL = v
			}
		case <-deadline:
			t.Fatalf("no banner from rmqd --dev within %v:\n%s\n%s", 4*waitLong, strings.Join(d.banner, "\n"), d.log)
		}
	}
	// The last line names the rmqctl command.
	select {
	case line := <-lines:
		d.banner = append(d.banner, line)
	case <-deadline:
		t.Fatalf("the banner's last line is missing:\n%s", strings.Join(d.banner, "\n"))
	}
	field := func(prefix string) string {
		for _, l := range d.banner {
			if v, ok := strings.CutPrefix(l, prefix); ok {
				return strings.TrimSpace(v)
			}
		}
		t.Fatalf("no %q line in the banner:\n%s", prefix, strings.Join(d.banner, "\n"))
		return ""
	}
	d.api = strings.TrimPrefix(field("  API "), "http://")
	d.admin = strings.TrimPrefix(field("  admin "), "http://")
	d.dashboardURL = field("  dashboard ")
	require.Equal(t, field("  Redis "), d.redisURL)
	d.redisAddr = strings.TrimSuffix(strings.TrimPrefix(d.redisURL, "redis://"), "/0")
	require.Equal(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(apiPort)), d.api)
	require.Equal(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(adminPort)), d.admin)
	return d
}

// runSession runs blocks as one bash script (stopping at the first
// failing command) in dir, with the README's addresses replaced, and
// checks its output against the blocks' "#> " lines.
func runSession(t *testing.T, name string, blocks []readmetest.Block, addrs *strings.Replacer, dir string, env []string, timeout time.Duration) {
	t.Helper()
	var script, want strings.Builder
	script.WriteString("set -euo pipefail -x\n")
	for _, b := range blocks {
		require.Equal(t, "sh", b.Lang, "README line %d: a %s block is sh", b.Line, name)
		script.WriteString(addrs.Replace(b.Text))
		want.WriteString(b.Text)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = dir
	cmd.Env = append(readmetest.WithoutRedisVars(os.Environ()), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	require.NoError(t, err, "the README's %s session failed; its trace:\n%s\noutput:\n%s", name, &stderr, &stdout)
	require.NoError(t, readmetest.Match(readmetest.Expected(want.String()), readmetest.Lines(stdout.String())),
		"the README's %s session printed:\n%s\ntrace:\n%s", name, &stdout, &stderr)
}
