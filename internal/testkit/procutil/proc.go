// Package procutil runs the server binaries that tests and examples start
// (redis-server, ZooKeeper): one process group each, killed with its parent.
package procutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Proc is one run of a server binary.
type Proc struct {
	cmd     *exec.Cmd
	logPath string
	logOff  int64         // where this run's output starts in logPath
	done    chan struct{} // closed once the process has been reaped
	waitErr error         // valid after done is closed
}

type spawnReq struct {
	cmd   *exec.Cmd
	reply chan error
}

var (
	spawnOnce sync.Once
	spawnCh   chan spawnReq
)

// spawn starts cmd from one OS thread that never exits: Linux delivers
// Pdeathsig when the *thread* that forked the child exits, and a Go thread can
// exit when a goroutine that locked it returns, which would kill a healthy
// server in the middle of a test.
func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnCh = make(chan spawnReq)
		go func() {
			runtime.LockOSThread()
			for req := range spawnCh {
				req.reply <- req.cmd.Start()
			}
		}()
	})
	reply := make(chan error, 1)
	spawnCh <- spawnReq{cmd: cmd, reply: reply}
	return <-reply
}

// startProc runs bin with args in dir, appending stdout and stderr to logPath.
func Start(bin string, args []string, dir, logPath string) (*Proc, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	// The child gets its own copy of the descriptor, so ours can be closed
	// right after the start.
	defer logFile.Close()
	off, _ := logFile.Seek(0, io.SeekEnd)
	fmt.Fprintf(logFile, "=== %s %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))

	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	setProcAttr(cmd)
	if err := spawn(cmd); err != nil {
		return nil, err
	}
	p := &Proc{cmd: cmd, logPath: logPath, logOff: off, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *Proc) Pid() int { return p.cmd.Process.Pid }

func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// terminate asks for a clean shutdown and escalates to SIGKILL after grace.
func (p *Proc) Terminate(grace time.Duration) error {
	if p.Exited() {
		return nil
	}
	if err := SigTerm(p.Pid()); err != nil {
		return err
	}
	// A SIGSTOPped process keeps SIGTERM pending until it is continued.
	_ = SigCont(p.Pid())
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	return p.Kill()
}

func (p *Proc) Kill() error {
	if p.Exited() {
		return nil
	}
	if err := SigKill(p.Pid()); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("process %d did not exit after SIGKILL", p.Pid())
	}
}

// tail returns at most the last n lines this run wrote to its log, so that
// an error from an earlier run in the same directory is not mistaken for ours.
func (p *Proc) Tail(n int) string { return LogTail(p.logPath, p.logOff, n) }

// logTail returns at most the last n lines of the file at path after from.
func LogTail(path string, from int64, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const max = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size()-from > max {
		from = st.Size() - max
	}
	_, _ = f.Seek(from, io.SeekStart)
	b, _ := io.ReadAll(f)
	b = bytes.TrimRight(b, "\n")
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// ExitedError reports a server that died while we waited for it to answer.
// ExitedError reports a server that exited while starting, with the end of
// its log.
type ExitedError struct {
	Err  error
	Tail string
}

func (e *ExitedError) Error() string {
	return fmt.Sprintf("exited during startup (%v); log tail:\n%s", e.Err, e.Tail)
}

// IsAddrInUse reports whether a start failed because its port was taken.
func IsAddrInUse(err error) bool {
	var ex *ExitedError
	return errors.As(err, &ex) && strings.Contains(ex.Tail, "Address already in use")
}

// WaitErr is the process's exit status, once Exited reports true.
func (p *Proc) WaitErr() error { return p.waitErr }

// Done is closed once the process has exited and been reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// ReadyCheck tells whether a started server answers; what counts as ready
// depends on the server.
type ReadyCheck func(ctx context.Context) error

// StartReady starts bin like Start and polls ready every interval until it
// returns nil, the process exits, or timeout (or ctx) ends; on failure the
// process is killed. what names the awaited state in the error ("PONG").
func StartReady(ctx context.Context, bin string, args []string, dir, logPath string, timeout, interval time.Duration, what string, ready ReadyCheck) (*Proc, error) {
	p, err := Start(bin, args, dir, logPath)
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(ctx, timeout, interval, what, ready); err != nil {
		_ = p.Kill()
		return nil, err
	}
	return p, nil
}

func (p *Proc) waitReady(ctx context.Context, timeout, interval time.Duration, what string, ready ReadyCheck) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Whoever holds a taken port may accept our connection and never answer;
	// stop waiting for that answer as soon as our process is known dead.
	go func() {
		select {
		case <-p.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last error
	for {
		if p.Exited() {
			return &ExitedError{Err: p.WaitErr(), Tail: p.Tail(30)}
		}
		if last = ready(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			if p.Exited() {
				return &ExitedError{Err: p.WaitErr(), Tail: p.Tail(30)}
			}
			return fmt.Errorf("no %s (%v, last: %v); log tail:\n%s", what, ctx.Err(), last, p.Tail(30))
		case <-tick.C:
		}
	}
}
