package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/testkit/procutil"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
)

// The http case (-cases http; not in the default run):
// rmqd, the lmstfy-compatible HTTP server, measured over HTTP as its users
// see it, and for what it costs. rmqd is built from the working tree; when
// LMSTFY_BIN names an lmstfy server binary, lmstfy runs the same cases in
// the same run. Each server gets a throwaway redis-server of its own with
// appendonly yes / appendfsync everysec (what lmstfy demands of its Redis,
// so both pay the same AOF cost).
//
// Per server and run: wrk publishes for -http-d (PUT, 128-byte bodies,
// lmstfy's defaults: ttl 86400, tries 1), then drains that backlog for
// -http-d with consume (ttr=60, no wait) and ack (DELETE) on the same
// connections. The CPU the server and its redis-server used in each phase
// (from /proc/<pid>/stat) divided by the jobs is the cost per job. There
// are -runs runs, the servers' order reversed every run (a shared machine's
// load moves during a run); the table shows medians. Then, rmqd only, once,
// firing lateness over long poll (lmstfy's delays are whole seconds).

const (
	httpClients = 32 // wrk connections; the lateness case's Go clients
	// httpLateRate and httpLateSpread: the lateness case's jobs come due
	// at 1,000/s over 3 s.
	httpLateRate   = 1000
	httpLateSpread = 3 * time.Second
	// httpLateLead is how far ahead of the first due instant publishing
	// starts; 3,000 publishes take well under it.
	httpLateLead = 1500 * time.Millisecond
	httpNS       = "bench"
)

// httpPhase is one wrk phase of one server: its rate and what it cost.
type httpPhase struct {
	jobs      int64   // published, or consumed and acked
	rate      float64 // jobs/s
	requests  int64
	serverCPU time.Duration
	redisCPU  time.Duration
	redisCmds int64 // Redis commands (those of scripts included)
	scripts   int64 // script calls (EVAL, EVALSHA)
	note      string
}

func (p httpPhase) perJob(d time.Duration) float64 {
	if p.jobs == 0 {
		return 0
	}
	return float64(d.Microseconds()) / float64(p.jobs)
}

// httpRun is one run of one server in the http case.
type httpRun struct {
	publish, consume httpPhase
	pubErr, conErr   string
}

// costPerJob is the server's and Redis's CPU per job, publish + consume +
// ack, in µs.
func (r httpRun) costPerJob() (server, redis float64) {
	return r.publish.perJob(r.publish.serverCPU) + r.consume.perJob(r.consume.serverCPU),
		r.publish.perJob(r.publish.redisCPU) + r.consume.perJob(r.consume.redisCPU)
}

// httpServerResult is one server's figures in the http case.
type httpServerResult struct {
	server string // "rmqd" or "lmstfy"
	runs   []httpRun
	lat    *waveResult // rmqd only: lmstfy's delays are whole seconds
}

// failed returns the first run's error, if any run failed.
func (r httpServerResult) failed() string {
	for _, x := range r.runs {
		if x.pubErr != "" || x.conErr != "" {
			return strings.TrimSpace(x.pubErr + " " + x.conErr)
		}
	}
	return ""
}

// httpTarget is one running server and the client that talks to it.
type httpTarget struct {
	name       string
	api, admin string // base URLs
	token      string
	hc         *http.Client
}

func newHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 256
	tr.MaxIdleConnsPerHost = 64
	tr.MaxConnsPerHost = 0
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

type httpServer struct {
	name  string
	start func(redisAddr string) (*procutil.Proc, *httpTarget, error)
}

// httpCase runs the http case and stores its results in b.res.http.
func (b *runner) httpCase(ctx context.Context) error {
	wrk, err := wrkPath(ctx)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "rmq-bench-http-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	bin := os.Getenv("RMQD_BIN") // another build to measure (an older tree's, say)
	if bin == "" {
		progress("http: building rmqd")
		bin = filepath.Join(dir, "rmqd")
		// Built in its own module (cmd/, next to the library's directory
		// that the replace of go.mod points at), with that module's go.sum.
		root, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/rmq-go/rmq").Output()
		if err != nil {
			return fmt.Errorf("http: locate the rmq module: %w", err)
		}
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./rmqd")
		build.Dir = filepath.Join(string(bytes.TrimSpace(root)), "cmd")
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("http: go build rmqd: %v\n%s", err, out)
		}
	}
	hc := newHTTPClient()
	defer hc.CloseIdleConnections()

	servers := []httpServer{{"rmqd", func(addr string) (*procutil.Proc, *httpTarget, error) {
		return startRMQD(ctx, bin, dir, addr, hc)
	}}}
	if lb := os.Getenv("LMSTFY_BIN"); lb != "" {
		servers = append(servers, httpServer{"lmstfy", func(addr string) (*procutil.Proc, *httpTarget, error) {
			return startLmstfy(ctx, lb, dir, addr, hc)
		}})
	}
	progress("http: an empty handler under wrk for %v (the machine's ceiling)", b.o.httpDur)
	if v, err := httpCeiling(ctx, wrk, dir, b.o.httpDur, b.o.body); err == nil {
		b.res.httpCeiling = v
	} else {
		progress("http: empty handler: %v", err)
	}
	b.res.http = make([]httpServerResult, len(servers))
	for i, s := range servers {
		b.res.http[i].server = s.name
	}
	for run := range b.o.runs {
		for k := range servers {
			i := k
			if run%2 == 1 {
				i = len(servers) - 1 - k
			}
			r, lat, err := b.httpServerCase(ctx, wrk, dir, servers[i], run == 0 && servers[i].name == "rmqd")
			if err != nil {
				return err
			}
			b.res.http[i].runs = append(b.res.http[i].runs, r)
			if lat != nil {
				b.res.http[i].lat = lat
			}
		}
	}
	return nil
}

// httpServerCase runs one server on a Redis of its own through the cases,
// lateness too when asked.
func (b *runner) httpServerCase(ctx context.Context, wrk, dir string, s httpServer, lateness bool) (r httpRun, lat *waveResult, err error) {
	srv, err := redisserver.Start(ctx, redisserver.Config{AppendOnly: true, AppendFsync: "everysec"})
	if err != nil {
		return r, nil, err
	}
	defer srv.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	progress("http: starting %s", s.name)
	p, t, err := s.start(srv.Addr())
	if err != nil {
		return r, nil, fmt.Errorf("http: start %s: %w", s.name, err)
	}
	defer func() {
		if err := p.Terminate(10 * time.Second); err != nil {
			progress("http: stopping %s: %v", s.name, err)
		}
	}()
	m := &httpMeter{server: p.Pid(), redis: srv.Pid(), rdb: rdb}
	headers := []string{"X-Token: " + t.token}

	progress("http: %s publish under wrk for %v", s.name, b.o.httpDur)
	url := t.api + "/api/" + httpNS + "/thru?delay=0"
	r.publish, err = m.phase(ctx, func() (wrkResult, error) {
		return runWrk(ctx, wrk, dir, wrkPublishLua, "publish", b.o.body, b.o.httpDur, url, headers)
	}, func(w wrkResult) int64 { return w.requests - w.non2xx })
	if err != nil {
		r.pubErr = err.Error()
		return r, nil, ctx.Err()
	}
	if r.publish.requests != r.publish.jobs {
		r.pubErr = fmt.Sprintf("%d of %d publishes failed", r.publish.requests-r.publish.jobs, r.publish.requests)
	}

	progress("http: %s consume+ack under wrk for %v", s.name, b.o.httpDur)
	var w wrkResult
	r.consume, err = m.phase(ctx, func() (wrkResult, error) {
		w, err = runWrk(ctx, wrk, dir, wrkConsumeLua, "consume", b.o.body, b.o.httpDur, t.api, headers, httpNS, "thru")
		return w, err
	}, func(w wrkResult) int64 { return w.acked })
	switch {
	case err != nil:
		r.conErr = err.Error()
	case w.failed > 0 || w.non2xx > w.empty:
		r.conErr = fmt.Sprintf("%d failed answers, %d not 2xx (%d of them 404)", w.failed, w.non2xx, w.empty)
	case w.empty > 0:
		r.consume.note = fmt.Sprintf("%d consumes found the queue empty", w.empty)
	}
	if lateness && ctx.Err() == nil {
		progress("http: %s lateness, %d jobs/s over %v", s.name, httpLateRate, httpLateSpread)
		lw := httpLateness(ctx, t, "late", b.o.body)
		lat = &lw
	}
	return r, lat, ctx.Err()
}

// httpMeter reads what a phase cost: CPU of the server and of Redis, and
// Redis's commands.
type httpMeter struct {
	server, redis int
	rdb           *redis.Client
}

func (m *httpMeter) phase(ctx context.Context, run func() (wrkResult, error), jobs func(wrkResult) int64) (httpPhase, error) {
	var p httpPhase
	s0, err := procCPU(m.server)
	if err != nil {
		return p, err
	}
	r0, err := procCPU(m.redis)
	if err != nil {
		return p, err
	}
	c0, e0 := redisCounts(ctx, m.rdb)
	w, err := run()
	if err != nil {
		return p, err
	}
	s1, err := procCPU(m.server)
	if err != nil {
		return p, err
	}
	r1, err := procCPU(m.redis)
	if err != nil {
		return p, err
	}
	c1, e1 := redisCounts(ctx, m.rdb)
	p.jobs = jobs(w)
	p.requests = w.requests
	if w.elapsed > 0 {
		p.rate = float64(p.jobs) / w.elapsed
	}
	p.serverCPU, p.redisCPU = s1-s0, r1-r0
	// The INFO of these reads is one command, left out.
	p.redisCmds, p.scripts = c1-c0-1, e1-e0
	if w.errors != "" {
		p.note = w.errors
	}
	return p, nil
}

// redisCounts reads from INFO commandstats the commands Redis ran (those
// of scripts included) and the script calls.
func redisCounts(ctx context.Context, rdb *redis.Client) (cmds, scripts int64) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(line, ":calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, _ := strconv.ParseInt(calls, 10, 64)
		cmds += n
		switch strings.TrimPrefix(name, "cmdstat_") {
		case "evalsha", "eval", "evalsha_ro", "eval_ro":
			scripts += n
		}
	}
	return cmds, scripts
}

func loopback() (string, error) {
	p, err := procutil.FreePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

// readyGET is a ReadyCheck: url answers 200.
func readyGET(hc *http.Client, url string) procutil.ReadyCheck {
	return func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	}
}

func startRMQD(ctx context.Context, bin, dir, redisAddr string, hc *http.Client) (*procutil.Proc, *httpTarget, error) {
	api, err := loopback()
	if err != nil {
		return nil, nil, err
	}
	adm, err := loopback()
	if err != nil {
		return nil, nil, err
	}
	args := []string{"--redis-url", "redis://" + redisAddr + "/0", "--listen", api, "--admin-listen", adm, "--log-level", "error"}
	t := &httpTarget{name: "rmqd", api: "http://" + api, admin: "http://" + adm, hc: hc}
	p, err := procutil.StartReady(ctx, bin, args, dir, filepath.Join(dir, "rmqd.log"), 30*time.Second, 50*time.Millisecond, "rmqd /version", readyGET(hc, t.admin+"/version"))
	if err != nil {
		return nil, nil, err
	}
	if t.token, err = t.newToken(ctx); err != nil {
		_ = p.Kill()
		return nil, nil, err
	}
	return p, t, nil
}

// startLmstfy starts the lmstfy server of LMSTFY_BIN with the smallest
// config it accepts.
func startLmstfy(ctx context.Context, bin, dir, redisAddr string, hc *http.Client) (*procutil.Proc, *httpTarget, error) {
	api, err := loopback()
	if err != nil {
		return nil, nil, err
	}
	adm, err := loopback()
	if err != nil {
		return nil, nil, err
	}
	ah, ap, _ := net.SplitHostPort(api)
	dh, dp, _ := net.SplitHostPort(adm)
	conf := fmt.Sprintf("Host = %q\nPort = %s\nAdminHost = %q\nAdminPort = %s\nLogLevel = \"error\"\nLogDir = %q\n\n[AdminRedis]\nAddr = %q\n\n[Pool]\n[Pool.default]\nAddr = %q\n",
		ah, ap, dh, dp, dir, redisAddr, redisAddr)
	cf := filepath.Join(dir, "lmstfy.toml")
	if err := os.WriteFile(cf, []byte(conf), 0o600); err != nil {
		return nil, nil, err
	}
	t := &httpTarget{name: "lmstfy", api: "http://" + api, admin: "http://" + adm, hc: hc}
	p, err := procutil.StartReady(ctx, bin, []string{"-c", cf}, dir, filepath.Join(dir, "lmstfy.log"), 30*time.Second, 50*time.Millisecond, "lmstfy /info", readyGET(hc, t.admin+"/info"))
	if err != nil {
		return nil, nil, err
	}
	if t.token, err = t.newToken(ctx); err != nil {
		_ = p.Kill()
		return nil, nil, err
	}
	return p, t, nil
}

func (t *httpTarget) newToken(ctx context.Context) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, t.admin+"/token/"+httpNS+"?description=bench", nil)
	resp, err := t.hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var body struct {
		Token string `json:"token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusCreated || body.Token == "" {
		return "", fmt.Errorf("%s: POST /token: %s %v", t.name, resp.Status, err)
	}
	return body.Token, nil
}

// do sends one request and reads the whole answer.
func (t *httpTarget) do(ctx context.Context, method, url string, body []byte) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("X-Token", t.token)
	resp, err := t.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// httpParallel runs f on httpClients goroutines until one fails or all return;
// every goroutine has stopped when it returns.
func httpParallel(ctx context.Context, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range httpClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}()
	}
	wg.Wait()
	return first
}

func httpBody(size int) []byte { return bytes.Repeat([]byte("x"), size) }

type consumed struct {
	JobID string `json:"job_id"`
}
