package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// BullMQ runs in Node: bench/bullmq holds a package.json pinning BullMQ (and
// ioredis, its Redis client) exactly, a package-lock.json without registry
// addresses, and driver.mjs, which runs one case per process. The bench
// installs node and npm with apt-get when they are missing and the
// packages with `npm ci` when node_modules does not hold the pinned BullMQ;
// nothing of it is needed unless -systems names bullmq.

var (
	// errNoNode: node or npm is missing and could not be installed.
	errNoNode = errors.New("node or npm missing")
	// errNpmCI: npm ci failed (offline, say).
	errNpmCI = errors.New("npm ci failed")
)

// bullmqDir is bench/bullmq: next to this source file when it is there (go
// run and go test from anywhere), else under the working directory.
func bullmqDir() string {
	if _, file, _, ok := runtime.Caller(0); ok {
		dir := filepath.Join(filepath.Dir(file), "bullmq")
		if _, err := os.Stat(filepath.Join(dir, "driver.mjs")); err == nil {
			return dir
		}
	}
	return "bullmq"
}

// bullmqPinned reads the BullMQ version package.json pins.
func bullmqPinned(dir string) (string, error) {
	var p struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	if err != nil {
		return "", fmt.Errorf("bullmq: %w", err)
	}
	v := p.Dependencies["bullmq"]
	if v == "" {
		return "", fmt.Errorf("bullmq: %s/package.json pins no bullmq", dir)
	}
	return v, nil
}

// bullmqInstalled reads the version of the BullMQ in node_modules ("" when
// there is none).
func bullmqInstalled(dir string) string {
	var p struct {
		Version string `json:"version"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", "bullmq", "package.json"))
	if err != nil || json.Unmarshal(b, &p) != nil {
		return ""
	}
	return p.Version
}

// ensureBullMQ makes node, npm and the pinned BullMQ present, and returns
// BullMQ's version and node's. apt false: node and npm are not installed
// when missing (errNoNode; the tests skip).
func ensureBullMQ(ctx context.Context, dir string, apt bool) (bull, node string, err error) {
	pinned, err := bullmqPinned(dir)
	if err != nil {
		return "", "", err
	}
	_, nodeErr := exec.LookPath("node")
	_, npmErr := exec.LookPath("npm")
	if nodeErr != nil || npmErr != nil {
		if !apt {
			return "", "", errNoNode
		}
		if err := aptInstall(ctx, "nodejs", "npm"); err != nil {
			return "", "", err
		}
	}
	out, err := exec.CommandContext(ctx, "node", "--version").Output()
	if err != nil {
		return "", "", fmt.Errorf("bullmq: node --version: %w", err)
	}
	node = strings.TrimSpace(string(out))
	if bullmqInstalled(dir) != pinned {
		// ci: exactly the lockfile's versions. --ignore-scripts: msgpackr's
		// optional native build is not needed (it falls back to JavaScript)
		// and would want a compiler.
		progress("bullmq: running npm ci in %s", dir)
		cmd := exec.CommandContext(ctx, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", node, fmt.Errorf("bullmq: %w in %s: %w\n%s", errNpmCI, dir, err, out)
		}
		if v := bullmqInstalled(dir); v != pinned {
			return "", node, fmt.Errorf("bullmq: npm ci installed bullmq %q, want %s", v, pinned)
		}
	}
	return pinned, node, nil
}

// aptInstall installs Debian packages (as root, or with sudo -n), the way
// the throwaway redis-server is installed.
func aptInstall(ctx context.Context, pkgs ...string) error {
	apt, err := exec.LookPath("apt-get")
	if err != nil {
		return fmt.Errorf("%w: apt-get not available; install %s by hand", errNoNode, strings.Join(pkgs, " "))
	}
	var prefix []string
	if os.Geteuid() != 0 {
		sudo, err := exec.LookPath("sudo")
		if err != nil {
			return fmt.Errorf("%w: not root and no sudo; run apt-get install -y %s", errNoNode, strings.Join(pkgs, " "))
		}
		prefix = []string{sudo, "-n"} // fail rather than wait for a password
	}
	run := func(args ...string) error {
		argv := append(append(append([]string{}, prefix...), apt), args...)
		progress("running %s", strings.Join(argv, " "))
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, out)
		}
		return nil
	}
	install := append([]string{"install", "-y", "--no-install-recommends"}, pkgs...)
	if err := run(install...); err != nil {
		if uerr := run("update"); uerr != nil { // a fresh container has no package lists
			return uerr
		}
		return run(install...)
	}
	return nil
}

// bullReq is one case for driver.mjs (its cfg).
type bullReq struct {
	Case       string `json:"case"` // produce, batch, consume, far, lateness
	Host       string `json:"host"`
	Port       int    `json:"port"`
	Queue      string `json:"queue"`
	N          int    `json:"n,omitempty"`
	G          int    `json:"g,omitempty"`
	Batch      int    `json:"batch,omitempty"`
	Body       int    `json:"body"`
	Tag        string `json:"tag,omitempty"`
	Workers    int    `json:"workers,omitempty"`
	Producers  int    `json:"producers,omitempty"`
	Rate       int    `json:"rate,omitempty"`
	DurationMs int64  `json:"durationMs,omitempty"`
	LeadMs     int64  `json:"leadMs,omitempty"`
}

// bullOut is a line driver.mjs prints.
type bullOut struct {
	Ready     bool      `json:"ready"`
	Done      bool      `json:"done"`
	Error     string    `json:"error"`
	Warning   string    `json:"warning"`
	Count     int       `json:"count"`
	Sent      int       `json:"sent"`
	Lat       []float64 `json:"lat"` // ms, in firing order
	Extra     int       `json:"extra"`
	SendLagMs float64   `json:"sendLagMs"`
}

// runDriver runs one case in a node process: m (if not nil) meters the
// timed section, with the node process as the client.
func runDriver(ctx context.Context, dir string, req bullReq, m *meter, verbose bool) (bullOut, error) {
	arg, err := json.Marshal(req)
	if err != nil {
		return bullOut{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "driver.mjs", string(arg))
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if verbose {
		cmd.Stderr = io.MultiWriter(&stderr, os.Stderr)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return bullOut{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return bullOut{}, err
	}
	if err := cmd.Start(); err != nil {
		return bullOut{}, fmt.Errorf("bullmq: starting node: %w", err)
	}
	fail := func(err error) (bullOut, error) {
		stdin.Close()
		cancel()
		werr := cmd.Wait()
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 2000 {
			msg = "…" + msg[len(msg)-2000:]
		}
		if msg != "" {
			return bullOut{}, fmt.Errorf("bullmq %s: %w (node: %v)\n%s", req.Case, err, werr, msg)
		}
		return bullOut{}, fmt.Errorf("bullmq %s: %w (node: %v)", req.Case, err, werr)
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 256<<20) // the lateness line lists every firing
	next := func() (bullOut, error) { return nextOut(sc, req.Case, verbose) }
	if o, err := next(); err != nil || !o.Ready {
		return fail(fmt.Errorf("waiting for ready: %v", err))
	}
	if m != nil {
		m.pid = cmd.Process.Pid
		m.start()
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		return fail(err)
	}
	out, err := next()
	if m != nil {
		m.stop()
	}
	if err != nil || !out.Done {
		return fail(fmt.Errorf("waiting for done: %v", err))
	}
	stdin.Close() // the driver closes its connections and exits
	if err := cmd.Wait(); err != nil {
		return out, fmt.Errorf("bullmq %s: node: %w\n%s", req.Case, err, stderr.String())
	}
	return out, nil
}

// procIO reads what a process read and wrote (bytes) and its write calls
// from /proc/<pid>/io: for BullMQ's node driver, whose only reads and
// writes in a timed section are its Redis socket's (and one short line on
// stdout), the wire bytes and, as ioredis writes each flush of commands
// once, about its round trips.
func procIO(pid int) (read, written, writes int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch k {
		case "rchar":
			read = n
		case "wchar":
			written = n
		case "syscw":
			writes = n
		}
	}
	return read, written, writes
}

// nextOut reads the driver's next line that is not a warning.
func nextOut(sc *bufio.Scanner, caseName string, verbose bool) (bullOut, error) {
	for sc.Scan() {
		var o bullOut
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			return o, fmt.Errorf("driver said %q: %w", sc.Text(), err)
		}
		switch {
		case o.Error != "":
			return o, errors.New(o.Error)
		case o.Warning != "":
			if verbose {
				progress("bullmq %s: %s", caseName, o.Warning)
			}
			continue
		}
		return o, nil
	}
	if err := sc.Err(); err != nil {
		return bullOut{}, err
	}
	return bullOut{}, io.ErrUnexpectedEOF
}
