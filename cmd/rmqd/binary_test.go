package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/procutil"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/encode"
)

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// rmqdBinary builds the real rmqd once per test binary (TestMain removes it).
func rmqdBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "rmqd-test-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "rmqd")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

// rmqdProc is a running rmqd process.
type rmqdProc struct {
	cmd       *exec.Cmd
	out       *syncBuffer
	api       string // base URLs
	admin     string
	done      chan struct{}
	exitState *os.ProcessState
}

// startRmqd starts the binary on free loopback ports and waits until both
// listeners answer. env adds variables (RMQD_…) to the environment.
func startRmqd(t testing.TB, redisURL string, env []string, args ...string) *rmqdProc {
	t.Helper()
	bin := rmqdBinary(t)
	apiPort, err := procutil.FreePort()
	require.NoError(t, err)
	adminPort, err := procutil.FreePort()
	require.NoError(t, err)
	p := &rmqdProc{out: &syncBuffer{}, done: make(chan struct{}),
		api: fmt.Sprintf("http://127.0.0.1:%d", apiPort), admin: fmt.Sprintf("http://127.0.0.1:%d", adminPort)}
	p.cmd = exec.Command(bin, append([]string{"--redis-url", redisURL,
		"--listen", fmt.Sprintf("127.0.0.1:%d", apiPort)}, args...)...)
	p.cmd.Env = append(os.Environ(), append(env, fmt.Sprintf("RMQD_ADMIN_LISTEN=127.0.0.1:%d", adminPort))...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	require.NoError(t, p.cmd.Start())
	go func() {
		_ = p.cmd.Wait()
		p.exitState = p.cmd.ProcessState
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("rmqd output:\n%s", p.out.String())
		}
	})
	// The listeners are bound before rmqd logs that it listens: from then
	// on both answer.
	p.out.waitFor(t, "rmqd: listening", p.done)
	for _, u := range []string{p.admin + "/version", p.api + "/api/ns/q/size"} {
		resp, err := http.Get(u)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", u)
	}
	return p
}

// stop sends SIGTERM and returns the exit code.
func (p *rmqdProc) stop(t *testing.T) int {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
	case <-time.After(waitLong):
		t.Fatalf("rmqd did not stop within %v of SIGTERM", waitLong)
	}
	return p.exitState.ExitCode()
}

func TestBinaryHelpListsEveryFlagAndVariable(t *testing.T) {
	out, err := exec.Command(rmqdBinary(t), "--help").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, f := range []string{"redis-url", "redis-cluster", "redis-tls-ca", "dashboard", "listen", "admin-listen", "pool", "prefix", "admin-account",
		"log-format", "log-level", "access-log", "max-wait", "cache-ttl", "shutdown-timeout", "dev",
		"admin-host", "max-auth-failures", "trusted-proxy", "pprof", "forward"} {
		require.Regexp(t, "(?m)^  --"+f+"( \\S+)?$", string(out))
		require.Contains(t, string(out), envName(f), f)
	}
	out, err = exec.Command(rmqdBinary(t), "--nope").CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	require.Equal(t, 2, exit.ExitCode())
}

func TestBinaryServesAndStopsOnSIGTERM(t *testing.T) {
	srv := redistest.Shared(t)
	prefix := redistest.Prefix(t)
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + prefix, "RMQD_LOG_FORMAT=json"})

	a := do(t, "POST", p.admin+"/token/ns?description=bin", "")
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	var tok map[string]string
	a.json(t, &tok)
	a = do(t, "PUT", p.api+"/api/ns/q?delay=0", "hello", "X-Token: "+tok["token"])
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	a = do(t, "GET", p.api+"/api/ns/q/size", "")
	require.JSONEq(t, `{"namespace":"ns","queue":"q","size":1}`, string(a.body))
	require.Len(t, a.header.Get("X-Request-ID"), 26)
	// The prefix came from the environment.
	require.NotEmpty(t, redistest.KeysWithPrefix(t, redistest.Client(t, srv), prefix+":rmqd:tokens:"))

	require.Equal(t, 0, p.stop(t))
	out := p.out.String()
	require.Contains(t, out, `"msg":"rmqd: stopped"`)
	require.Contains(t, out, `"msg":"access"`, "JSON access log lines")
	_, err := http.Get(p.api + "/api/ns/q/size")
	require.Error(t, err, "the listener is closed")
}

// Two rmqd processes on one Redis share tokens and rate limits; a job
// consumed through one is acked through the other.
func TestTwoProcessesShareTokensAndLimits(t *testing.T) {
	srv := redistest.Shared(t)
	env := []string{"RMQD_PREFIX=" + redistest.Prefix(t)}
	url := "redis://" + srv.Addr() + "/0"
	a, b := startRmqd(t, url, env), startRmqd(t, url, env)

	r := do(t, "POST", a.admin+"/token/ns?description=shared", "")
	require.Equal(t, http.StatusCreated, r.status)
	var tok map[string]string
	r.json(t, &tok)
	hdr := "X-Token: " + tok["token"]
	r = do(t, "POST", b.admin+"/token/ns/"+tok["token"]+"/limit", `{"read":0,"write":3,"interval":3600}`)
	require.Equal(t, http.StatusCreated, r.status)

	for i, p := range []*rmqdProc{a, b, a} {
		r = do(t, "PUT", p.api+"/api/ns/q", fmt.Sprint(i), hdr)
		require.Equal(t, http.StatusCreated, r.status, "publish %d: %s", i, r)
	}
	for _, p := range []*rmqdProc{a, b} {
		r = do(t, "PUT", p.api+"/api/ns/q", "over", hdr)
		require.Equal(t, http.StatusTooManyRequests, r.status, "%s", r)
	}
	require.JSONEq(t, `{"namespace":"ns","queue":"q","size":3}`, string(do(t, "GET", b.api+"/api/ns/q/size", "").body))

	r = do(t, "GET", a.api+"/api/ns/q?ttr=60", "", hdr)
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	var j encode.JobBody
	r.json(t, &j)
	require.Equal(t, "0", string(j.Data))
	require.Equal(t, http.StatusNoContent, do(t, "DELETE", b.api+"/api/ns/q/job/"+j.JobID, "", hdr).status)
	r = do(t, "GET", a.api+"/api/ns/q/job/"+j.JobID, "", hdr)
	requireError(t, r, http.StatusNotFound, "job not found")
}

// SIGTERM ends a long poll at once (404 no job) and the process exits 0.
func TestBinarySIGTERMEndsLongPolls(t *testing.T) {
	srv := redistest.Shared(t)
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + redistest.Prefix(t)}, "--log-level", "debug")
	r := do(t, "POST", p.admin+"/token/ns?description=x", "")
	var tok map[string]string
	r.json(t, &tok)
	polled := make(chan answer, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", p.api+"/api/ns/q?timeout=60", nil)
		req.Header.Set("X-Token", tok["token"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			polled <- answer{status: -1, body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		polled <- answer{status: resp.StatusCode}
	}()
	// The poll is waiting once rmqd logs it (at debug level).
	require.Eventually(t, func() bool { return strings.Contains(p.out.String(), "rmqd: long poll") }, waitLong, 10*time.Millisecond)
	start := time.Now()
	require.Equal(t, 0, p.stop(t))
	got := <-polled
	require.Equal(t, http.StatusNotFound, got.status, "%s", got.body)
	require.Less(t, time.Since(start), 10*time.Second)
}

// rediss:// with a password, verified against the test's own CA.
func TestBinaryTLSRedis(t *testing.T) {
	files := redistest.TLSFiles(t)
	srv := redistest.Start(t, redisserver.Config{TLS: &files, Password: "pw"})
	p := startRmqd(t, "rediss://:pw@"+srv.Addr()+"/0", []string{"RMQD_REDIS_TLS_CA=" + files.CAFile})
	r := do(t, "POST", p.admin+"/token/ns?description=tls", "")
	require.Equal(t, http.StatusCreated, r.status, "%s", r)
	var tok map[string]string
	r.json(t, &tok)
	r = do(t, "PUT", p.api+"/api/ns/q", "x", "X-Token: "+tok["token"])
	require.Equal(t, http.StatusCreated, r.status, "%s", r)
	require.Equal(t, 0, p.stop(t))

	// Without the CA the server is not trusted: rmqd does not start.
	out, err := exec.Command(rmqdBinary(t), "--redis-url", "rediss://:pw@"+srv.Addr()+"/0",
		"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0").CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	require.Equal(t, 1, exit.ExitCode())
	require.Contains(t, string(out), "certificate signed by unknown authority")
	require.NotContains(t, string(out), ":pw@")
}
