package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The http case drives the servers with wrk, a load generator in C: on a
// two-core machine a Go HTTP client took most of the CPU and so measured
// itself. One wrk thread (-t1) with httpClients connections leaves the
// server and Redis most of the machine.

// wrkPath returns wrk, installing Debian's package when it is missing
// (needs root or a password-less sudo).
func wrkPath(ctx context.Context) (string, error) {
	if p, err := exec.LookPath("wrk"); err == nil {
		return p, nil
	}
	progress("http: wrk is missing: apt-get install -y wrk")
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		cmd = exec.CommandContext(ctx, "apt-get", "install", "-y", "wrk")
	} else {
		cmd = exec.CommandContext(ctx, "sudo", "-n", "apt-get", "install", "-y", "wrk")
	}
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("http: installing wrk: %v\n%s", err, out)
	}
	return exec.LookPath("wrk")
}

// wrkPublishLua PUTs the same body on every connection.
const wrkPublishLua = `
wrk.method = "PUT"
wrk.body = string.rep("x", tonumber(os.getenv("BENCH_BODY") or "128"))
`

// wrkConsumeLua consumes a job (GET) and acks it (DELETE) on the next
// request of any connection: pending acks go first. done() prints the
// counts of the thread, read back with thread:get.
const wrkConsumeLua = `
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args)
  ns, q = args[1], args[2]
  consumed, acked, empty, failed, pending = 0, 0, 0, 0, {}
end
function request()
  local id = table.remove(pending)
  if id then
    return wrk.format("DELETE", "/api/" .. ns .. "/" .. q .. "/job/" .. id)
  end
  return wrk.format("GET", "/api/" .. ns .. "/" .. q .. "?ttr=60")
end
function response(status, headers, body)
  if status == 200 then
    local id = string.match(body, '"job_id":"([^"]+)"')
    if id then
      consumed = consumed + 1
      table.insert(pending, id)
    else
      failed = failed + 1
    end
  elseif status == 204 then
    acked = acked + 1
  elseif status == 404 then
    empty = empty + 1
  else
    failed = failed + 1
  end
end
function done(summary, latency, requests)
  local c, a, e, f = 0, 0, 0, 0
  for _, t in ipairs(threads) do
    c, a, e, f = c + t:get("consumed"), a + t:get("acked"), e + t:get("empty"), f + t:get("failed")
  end
  io.write(string.format("RESULT consumed=%d acked=%d empty=%d failed=%d\n", c, a, e, f))
end
`

// wrkResult is what one wrk run printed.
type wrkResult struct {
	requests int64   // answers read
	non2xx   int64   // of them not 2xx/3xx
	errors   string  // socket errors, when any
	elapsed  float64 // seconds wrk ran
	// consume runs only
	consumed, acked, empty, failed int64
}

var (
	wrkRequests = regexp.MustCompile(`(\d+) requests in ([\d.]+)(us|ms|s|m)`)
	wrkNon2xx   = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
	wrkSocket   = regexp.MustCompile(`Socket errors: [^\n]*`)
	wrkCounts   = regexp.MustCompile(`RESULT consumed=(\d+) acked=(\d+) empty=(\d+) failed=(\d+)`)
)

// runWrk runs wrk -t1 -c httpClients for d with the script (written to
// dir, given the body size) against url, and parses its summary.
func runWrk(ctx context.Context, bin, dir, script, name string, body int, d time.Duration, url string, headers []string, args ...string) (wrkResult, error) {
	path := filepath.Join(dir, name+".lua")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		return wrkResult{}, err
	}
	cmdArgs := []string{"-t1", "-c" + strconv.Itoa(httpClients), "-d" + strconv.Itoa(int(d.Seconds())) + "s", "-s", path}
	for _, h := range headers {
		cmdArgs = append(cmdArgs, "-H", h)
	}
	cmdArgs = append(cmdArgs, url)
	if len(args) > 0 {
		cmdArgs = append(append(cmdArgs, "--"), args...)
	}
	cmd := exec.CommandContext(ctx, bin, cmdArgs...)
	cmd.Env = append(os.Environ(), "BENCH_BODY="+strconv.Itoa(body))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk %s: %v\n%s", strings.Join(cmdArgs, " "), err, out)
	}
	return parseWrk(string(out))
}

func parseWrk(out string) (wrkResult, error) {
	var r wrkResult
	m := wrkRequests.FindStringSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("wrk: no summary in\n%s", out)
	}
	r.requests, _ = strconv.ParseInt(m[1], 10, 64)
	v, _ := strconv.ParseFloat(m[2], 64)
	switch m[3] {
	case "us":
		v /= 1e6
	case "ms":
		v /= 1e3
	case "m":
		v *= 60
	}
	r.elapsed = v
	if m := wrkNon2xx.FindStringSubmatch(out); m != nil {
		r.non2xx, _ = strconv.ParseInt(m[1], 10, 64)
	}
	r.errors = wrkSocket.FindString(out)
	if m := wrkCounts.FindStringSubmatch(out); m != nil {
		r.consumed, _ = strconv.ParseInt(m[1], 10, 64)
		r.acked, _ = strconv.ParseInt(m[2], 10, 64)
		r.empty, _ = strconv.ParseInt(m[3], 10, 64)
		r.failed, _ = strconv.ParseInt(m[4], 10, 64)
	}
	return r, nil
}

// procCPU is the CPU time of a process (all its threads, and its children
// it waited for: Redis's AOF rewrites) from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	// The command name, in parentheses, may hold spaces: count from after it.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	f := strings.Fields(s[i+1:])
	// Fields 14-17 of stat (utime, stime, cutime, cstime) are f[11..14].
	if len(f) < 15 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	var ticks int64
	for _, x := range f[11:15] {
		v, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// Linux on every architecture Go supports.
const clockTicks = 100
