package procutil

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"
)

// Runner is the lifecycle the test servers share: one process at a time,
// stopped for good, shut down or killed and restarted on the same port and
// directory, frozen and thawed. A server embeds it and says how to launch.
type Runner struct {
	name  string        // message prefix: "redisserver"
	grace time.Duration // how long SIGTERM may take before SIGKILL
	addr  func() string
	logf  func(format string, args ...any)
	// launch starts the process and waits until it serves; on failure it
	// kills what it started.
	launch func(ctx context.Context) (*Proc, error)
	// beforeRestart, if set, is checked before each restart attempt.
	beforeRestart func() error

	dir     string
	ownsDir bool

	mu        sync.Mutex
	p         *Proc
	stopped   bool
	suspended bool
}

// RunnerConfig configures a Runner.
type RunnerConfig struct {
	Name          string
	Grace         time.Duration
	Addr          func() string
	Logf          func(format string, args ...any)
	Launch        func(ctx context.Context) (*Proc, error)
	BeforeRestart func() error
}

// Init sets the runner up; dir is removed by Stop when ownsDir.
func (r *Runner) Init(cfg RunnerConfig, dir string, ownsDir bool) {
	r.name, r.grace, r.addr, r.logf = cfg.Name, cfg.Grace, cfg.Addr, cfg.Logf
	r.launch, r.beforeRestart = cfg.Launch, cfg.BeforeRestart
	r.dir, r.ownsDir = dir, ownsDir
}

// Launch starts the process for the first time (the server's Start retries
// it on other ports).
func (r *Runner) Launch(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.launchLocked(ctx)
}

func (r *Runner) launchLocked(ctx context.Context) error {
	p, err := r.launch(ctx)
	if err != nil {
		return err
	}
	r.p, r.suspended = p, false
	return nil
}

// Abandon marks a runner whose first start failed: nothing to stop, and its
// own directory is removed.
func (r *Runner) Abandon() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	if r.ownsDir {
		_ = os.RemoveAll(r.dir)
	}
}

// Pid is the process id of the current run, or 0.
func (r *Runner) Pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.p == nil {
		return 0
	}
	return r.p.Pid()
}

// Running reports whether the process is alive (possibly suspended).
func (r *Runner) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.p != nil && !r.p.Exited()
}

// Stop shuts the server down (SIGTERM, SIGKILL after the grace period) and
// removes the directory if Start created it. It is idempotent; the server
// cannot be restarted afterwards. Use Shutdown or Kill to keep it
// restartable.
func (r *Runner) Stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return nil
	}
	r.stopped = true
	var err error
	if r.p != nil {
		err = r.p.Terminate(r.grace)
	}
	if r.ownsDir {
		if rerr := os.RemoveAll(r.dir); err == nil {
			err = rerr
		}
	}
	r.logf("%s: stopped %s", r.name, r.addr())
	return err
}

// Shutdown terminates the process gracefully (SIGTERM) but keeps the
// directory, so Restart can bring the same data back.
func (r *Runner) Shutdown() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.p == nil {
		return nil
	}
	return r.p.Terminate(r.grace)
}

// Kill simulates a crash: SIGKILL, no chance to flush anything not yet
// written. The directory is kept for Restart.
func (r *Runner) Kill() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.p == nil {
		return nil
	}
	r.logf("%s: killing %s", r.name, r.addr())
	return r.p.Kill()
}

// Restart starts the server again on the same port and directory and waits
// until it serves. A still-running process is shut down gracefully first.
func (r *Runner) Restart(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return fmt.Errorf("%s: Restart of %s after Stop", r.name, r.addr())
	}
	if r.p != nil {
		if err := r.p.Terminate(r.grace); err != nil {
			return fmt.Errorf("%s: restart %s: %w", r.name, r.addr(), err)
		}
	}
	var err error
	// The port cannot change (clients and cluster peers know it), so wait
	// for it instead of picking another one.
	for range 30 {
		if r.beforeRestart != nil {
			err = r.beforeRestart()
		}
		if err == nil {
			if err = r.launchLocked(ctx); err == nil || !IsAddrInUse(err) {
				break
			}
		}
		if ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("%s: restart %s: %w", r.name, r.addr(), err)
	}
	r.logf("%s: restarted %s (pid %d)", r.name, r.addr(), r.p.Pid())
	return nil
}

// Suspend freezes the process with SIGSTOP: connections stay open but
// nothing is answered, like a long GC pause or a stalled VM. On Linux it
// returns once every thread has stopped.
func (r *Runner) Suspend() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.p == nil || r.p.Exited() {
		return fmt.Errorf("%s: Suspend of %s: not running", r.name, r.addr())
	}
	if err := SigStop(r.p.Pid()); err != nil {
		return err
	}
	waitStopped(r.p.Pid())
	r.suspended = true
	return nil
}

// Resume continues a suspended process (SIGCONT).
func (r *Runner) Resume() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.p == nil || r.p.Exited() {
		return fmt.Errorf("%s: Resume of %s: not running", r.name, r.addr())
	}
	if err := SigCont(r.p.Pid()); err != nil {
		return err
	}
	r.suspended = false
	return nil
}

// Suspended reports whether the process is frozen by Suspend.
func (r *Runner) Suspended() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.suspended && r.p != nil && !r.p.Exited()
}
