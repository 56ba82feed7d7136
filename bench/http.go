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
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/internal/procutil"
	"github.com/rmq-go/rmq/internal/redisserver"
)

// The http case (-cases http, issue 12; not in the default run): rmqd, the
// lmstfy-compatible HTTP server, measured over HTTP as its users see it.
// rmqd is built from the working tree and started against a throwaway
// redis-server of its own with appendonly yes / appendfsync everysec (what
// lmstfy demands of its Redis, so both servers pay the same AOF cost). When
// LMSTFY_BIN names an lmstfy server binary, the publish and consume+ack cases
// also run against it on the same Redis (flushed between servers).

const (
	httpClients = 32
	// httpLateRate and httpLateSpread: the lateness case's jobs come due
	// at 1,000/s over 3 s.
	httpLateRate   = 1000
	httpLateSpread = 3 * time.Second
	// httpLateLead is how far ahead of the first due instant publishing
	// starts; 3,000 publishes take well under it.
	httpLateLead = 1500 * time.Millisecond
	httpNS       = "bench"
)

// httpServerResult is one server's figures in the http case.
type httpServerResult struct {
	server           string // "rmqd" or "lmstfy"
	publish, consume float64
	pubErr, conErr   string
	lat              *waveResult // rmqd only: lmstfy's delays are whole seconds
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

// httpCase runs the http case and stores its results in b.res.http.
func (b *runner) httpCase(ctx context.Context) error {
	srv, err := redisserver.Start(ctx, redisserver.Config{AppendOnly: true, AppendFsync: "everysec"})
	if err != nil {
		return err
	}
	defer srv.Stop()
	dir, err := os.MkdirTemp("", "rmq-bench-http-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	progress("http: building rmqd")
	bin := filepath.Join(dir, "rmqd")
	// Built in the library's own module (the replace of go.mod points at
	// it): rmqd's dependencies are in its go.sum, not in the bench's.
	root, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/rmq-go/rmq").Output()
	if err != nil {
		return fmt.Errorf("http: locate the rmq module: %w", err)
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/rmqd")
	build.Dir = string(bytes.TrimSpace(root))
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("http: go build rmqd: %v\n%s", err, out)
	}
	hc := newHTTPClient()
	defer hc.CloseIdleConnections()

	servers := []struct {
		name  string
		start func() (*procutil.Proc, *httpTarget, error)
	}{{"rmqd", func() (*procutil.Proc, *httpTarget, error) { return startRMQD(ctx, bin, dir, srv.Addr(), hc) }}}
	if lb := os.Getenv("LMSTFY_BIN"); lb != "" {
		servers = append(servers, struct {
			name  string
			start func() (*procutil.Proc, *httpTarget, error)
		}{"lmstfy", func() (*procutil.Proc, *httpTarget, error) { return startLmstfy(ctx, lb, dir, srv.Addr(), hc) }})
	}
	progress("http: an empty handler, %d PUTs (the machine's ceiling)", b.o.httpN)
	if v, err := httpCeiling(ctx, hc, b.o.httpN, b.o.body); err == nil {
		b.res.httpCeiling = v
	} else {
		progress("http: empty handler: %v", err)
	}
	for _, s := range servers {
		if err := flushAddr(ctx, srv.Addr()); err != nil {
			return err
		}
		progress("http: starting %s", s.name)
		p, t, err := s.start()
		if err != nil {
			return fmt.Errorf("http: start %s: %w", s.name, err)
		}
		r := httpServerResult{server: s.name}
		progress("http: %s publish, %d jobs", s.name, b.o.httpN)
		r.publish, err = httpPublish(ctx, t, "thru", b.o.httpN, b.o.body)
		if err != nil {
			r.pubErr = err.Error()
		} else {
			progress("http: %s consume+ack, %d jobs", s.name, b.o.httpN)
			r.consume, err = httpConsume(ctx, t, "thru", b.o.httpN)
			if err != nil {
				r.conErr = err.Error()
			}
		}
		if s.name == "rmqd" {
			progress("http: %s lateness, %d jobs/s over %v", s.name, httpLateRate, httpLateSpread)
			w := httpLateness(ctx, t, "late", b.o.body)
			r.lat = &w
		}
		b.res.http = append(b.res.http, r)
		if err := p.Terminate(10 * time.Second); err != nil {
			progress("http: stopping %s: %v", s.name, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// flushAddr empties the http case's Redis between servers.
func flushAddr(ctx context.Context, addr string) error {
	c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	if _, err := c.Write([]byte("*1\r\n$8\r\nFLUSHALL\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(buf[:n], []byte("+OK")) {
		return fmt.Errorf("FLUSHALL: %q", buf[:n])
	}
	return nil
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
		io.Copy(io.Discard, resp.Body)
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
// config it accepts, on the same Redis.
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

// httpPublish publishes n jobs due now from httpClients goroutines: jobs/s.
func httpPublish(ctx context.Context, t *httpTarget, q string, n, size int) (float64, error) {
	body := httpBody(size)
	url := t.api + "/api/" + httpNS + "/" + q + "?delay=0&tries=3&ttl=0"
	var next atomic.Int64
	start := time.Now()
	err := httpParallel(ctx, func(ctx context.Context) error {
		for next.Add(1) <= int64(n) {
			st, b, err := t.do(ctx, http.MethodPut, url, body)
			if err != nil {
				return err
			}
			if st != http.StatusCreated {
				return fmt.Errorf("publish: %d %s", st, b)
			}
		}
		return nil
	})
	return float64(n) / time.Since(start).Seconds(), err
}

type consumed struct {
	JobID string `json:"job_id"`
}

// httpConsume drains n jobs from q with consume (timeout=1) + DELETE ack
// on httpClients goroutines: jobs/s. A job seen twice is an error.
func httpConsume(ctx context.Context, t *httpTarget, q string, n int) (float64, error) {
	url := t.api + "/api/" + httpNS + "/" + q + "?ttr=60&timeout=1"
	var done atomic.Int64
	var seen sync.Map
	deadline := time.Now().Add(5 * time.Minute)
	start := time.Now()
	err := httpParallel(ctx, func(ctx context.Context) error {
		for done.Load() < int64(n) {
			if time.Now().After(deadline) {
				return fmt.Errorf("consume: %d of %d after 5m", done.Load(), n)
			}
			st, b, err := t.do(ctx, http.MethodGet, url, nil)
			if err != nil {
				return err
			}
			if st == http.StatusNotFound {
				continue // none ready (or another client took the last)
			}
			var j consumed
			if st != http.StatusOK || json.Unmarshal(b, &j) != nil || j.JobID == "" {
				return fmt.Errorf("consume: %d %s", st, b)
			}
			if _, dup := seen.LoadOrStore(j.JobID, true); dup {
				return fmt.Errorf("consume: job %s delivered twice", j.JobID)
			}
			st, b, err = t.do(ctx, http.MethodDelete, t.api+"/api/"+httpNS+"/"+q+"/job/"+j.JobID, nil)
			if err != nil {
				return err
			}
			if st != http.StatusNoContent {
				return fmt.Errorf("ack: %d %s", st, b)
			}
			done.Add(1)
		}
		return nil
	})
	return float64(n) / time.Since(start).Seconds(), err
}

// httpLateness publishes httpLateRate×httpLateSpread jobs due one every
// 1/rate apart (at=, an absolute instant, so the due time is exact rather
// than the server's receive time plus a delay) while httpClients consumers
// long-poll (timeout=3); lateness is the instant the consume answer arrived
// minus the job's due instant, at full precision.
func httpLateness(ctx context.Context, t *httpTarget, q string, size int) waveResult {
	n := int(httpLateRate * httpLateSpread.Seconds())
	var w waveResult
	body := httpBody(size)
	first := time.Now().Add(httpLateLead).Truncate(time.Millisecond)
	due := make(map[string]time.Time, n)
	var mu sync.Mutex
	lats := make([]time.Duration, 0, n)
	var got atomic.Int64

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var cerr error
	var cerrOnce sync.Once
	url := t.api + "/api/" + httpNS + "/" + q + "?ttr=60&timeout=3"
	end := first.Add(httpLateSpread + 30*time.Second)
	for range httpClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for got.Load() < int64(n) && cctx.Err() == nil && time.Now().Before(end) {
				st, b, err := t.do(cctx, http.MethodGet, url, nil)
				arrived := time.Now()
				if cctx.Err() != nil {
					return
				}
				if err == nil && st == http.StatusNotFound {
					continue
				}
				var j consumed
				if err == nil && (st != http.StatusOK || json.Unmarshal(b, &j) != nil) {
					err = fmt.Errorf("consume: %d %s", st, b)
				}
				if err != nil {
					cerrOnce.Do(func() { cerr = err })
					return
				}
				mu.Lock()
				d, ok := due[j.JobID]
				if ok {
					delete(due, j.JobID)
					lats = append(lats, arrived.Sub(d))
				} else {
					w.extra++
				}
				mu.Unlock()
				if ok {
					got.Add(1)
				}
				_, _, _ = t.do(cctx, http.MethodDelete, t.api+"/api/"+httpNS+"/"+q+"/job/"+j.JobID, nil)
			}
		}()
	}

	// Publish from httpClients goroutines; the ids are recorded under mu
	// before a consumer can see them (they are due ≥ the lead ahead).
	var next atomic.Int64
	perr := httpParallel(ctx, func(ctx context.Context) error {
		for {
			i := int(next.Add(1)) - 1
			if i >= n {
				return nil
			}
			at := first.Add(time.Duration(i) * time.Second / httpLateRate)
			st, b, err := t.do(ctx, http.MethodPut, t.api+"/api/"+httpNS+"/"+q+"?tries=3&ttl=0&at="+at.UTC().Format(time.RFC3339Nano), body)
			if err != nil {
				return err
			}
			var j consumed
			if st != http.StatusCreated || json.Unmarshal(b, &j) != nil {
				return fmt.Errorf("publish: %d %s", st, b)
			}
			mu.Lock()
			due[j.JobID] = at
			mu.Unlock()
		}
	})
	w.sent = min(int(next.Load()), n)
	w.margin = time.Until(first)
	if perr != nil {
		w.err = "publish: " + perr.Error()
		cancel()
	}
	wg.Wait()
	if cerr != nil && w.err == "" {
		w.err = cerr.Error()
	}
	w.fired = len(lats)
	if len(lats) > 0 {
		slices.Sort(lats)
		w.p50 = lats[len(lats)/2]
		w.p99 = lats[min(len(lats)-1, len(lats)*99/100)]
		w.max = lats[len(lats)-1]
		for _, l := range lats {
			if l < 0 {
				w.early++
			}
		}
	}
	if w.err == "" && w.fired < n {
		w.err = fmt.Sprintf("%d of %d delivered", w.fired, n)
	}
	return w
}
