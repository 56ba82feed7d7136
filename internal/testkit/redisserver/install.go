package redisserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// ErrNotInstalled is wrapped by the errors of LookPath, Start and StartCluster
// when a binary is missing, so callers can tell "cannot run" from "broken".
var ErrNotInstalled = errors.New("not installed")

// LookPath returns the path of redis-server.
func LookPath() (string, error) {
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("redisserver: redis-server not found in PATH (apt-get install redis-server): %w", ErrNotInstalled)
	}
	return p, nil
}

// lookCLI returns the path of redis-cli, which StartCluster needs for
// `--cluster create`.
func lookCLI() (string, error) {
	p, err := exec.LookPath("redis-cli")
	if err != nil {
		return "", fmt.Errorf("redisserver: redis-cli not found in PATH (apt-get install redis-tools): %w", ErrNotInstalled)
	}
	return p, nil
}

// EnsureInstalled installs Debian's redis-server package (which brings
// redis-cli) when redis-server is missing, so that demo programs run on a
// fresh machine. It needs root or a password-less sudo; otherwise it returns
// the LookPath error.
func EnsureInstalled(ctx context.Context, logf func(format string, args ...any)) error {
	if _, err := LookPath(); err == nil {
		if _, err := lookCLI(); err == nil {
			return nil
		}
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := aptInstall(ctx, logf, "redis-server", "redis-tools"); err != nil {
		return err
	}
	if _, err := LookPath(); err != nil {
		return err
	}
	_, err := lookCLI()
	return err
}

func aptInstall(ctx context.Context, logf func(string, ...any), pkgs ...string) error {
	apt, err := exec.LookPath("apt-get")
	if err != nil {
		return fmt.Errorf("redisserver: %s missing and apt-get not available; install it by hand: %w", strings.Join(pkgs, " "), ErrNotInstalled)
	}
	var prefix []string
	if os.Geteuid() != 0 {
		sudo, err := exec.LookPath("sudo")
		if err != nil {
			return fmt.Errorf("redisserver: %s missing; not root and no sudo, run: apt-get install -y %s: %w",
				strings.Join(pkgs, " "), strings.Join(pkgs, " "), ErrNotInstalled)
		}
		// -n: fail instead of hanging on a password prompt nobody sees.
		prefix = []string{sudo, "-n"}
	}
	run := func(args ...string) error {
		argv := append(append(append([]string{}, prefix...), apt), args...)
		logf("redisserver: running %s", strings.Join(argv, " "))
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, lastLines(string(out), 20))
		}
		return nil
	}
	install := append([]string{"install", "-y", "--no-install-recommends"}, pkgs...)
	if err := run(install...); err != nil {
		// A fresh container usually has no package lists yet.
		if uerr := run("update"); uerr != nil {
			return fmt.Errorf("redisserver: %w", uerr)
		}
		if err := run(install...); err != nil {
			return fmt.Errorf("redisserver: %w", err)
		}
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
