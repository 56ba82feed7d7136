package readmetest

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/rmq"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// The README's Go program compiles as written in a module of its own, as a
// user's would (so it can import nothing internal), and does what the
// README says it prints against a real redis-server.
func TestReadmeProgram(t *testing.T) {
	root, err := Root()
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	programs, err := Blocks(readme, "program")
	require.NoError(t, err)
	require.Len(t, programs, 1, "one block marked program")
	require.Equal(t, "go", programs[0].Lang)
	outputs, err := Blocks(readme, "program-output")
	require.NoError(t, err)
	require.Len(t, outputs, 1, "one block marked program-output")

	bin := buildUserProgram(t, root, programs[0].Text)

	srv := redistest.Start(t, redisserver.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(WithoutRedisVars(os.Environ()), "REDIS_URL=redis://"+srv.Addr()+"/0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "the program failed:\nstdout:\n%s\nstderr:\n%s", &stdout, &stderr)

	// Lines of one topic come in the README's order; topics may interleave.
	want, got := byTopic(Lines(outputs[0].Text)), byTopic(Lines(stdout.String()))
	require.Equal(t, keys(want), keys(got), "topics printed:\n%s", &stdout)
	for topic, lines := range want {
		require.NoError(t, Match(lines, got[topic]), "topic %s; the whole output:\n%s", topic, &stdout)
	}

	// Close lost nothing: every message was acked or removed.
	rdb := redistest.Client(t, srv)
	all, err := rmq.NewInspector(rdb).AllStats(ctx)
	require.NoError(t, err)
	require.Len(t, all, 3)
	for _, st := range all {
		require.Zero(t, st.Store+st.Prepare+st.Dead+st.Delayed, "topic %s: %+v", st.Topic.Name(), st)
	}
}

// buildUserProgram writes src as main.go of a new module that requires this
// repository through a replace directive, as a user's module requires the
// published one, and builds it offline (every module it needs is the
// repository's own, already in the module cache).
func buildUserProgram(t *testing.T, root, src string) string {
	t.Helper()
	dir := t.TempDir()
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	goVersion := submatch(t, gomod, `(?m)^go (\S+)$`)
	redisVersion := submatch(t, gomod, `(?m)^\s*github\.com/redis/go-redis/v9 (\S+)`)
	mod := fmt.Sprintf("module example.com/first\n\ngo %s\n\nrequire (\n\tgithub.com/redis/go-redis/v9 %s\n\tgithub.com/rmq-go/rmq v0.0.0\n)\n\nreplace github.com/rmq-go/rmq => %s\n",
		goVersion, redisVersion, root)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644))

	bin := filepath.Join(dir, "first")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = dir
	// Outside the workspace, resolving the requirements the program's
	// imports add (-mod=mod) from the module cache only.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build of the README's program:\n%s", out)
	return bin
}

func submatch(t *testing.T, b []byte, expr string) string {
	t.Helper()
	m := regexp.MustCompile(expr).FindSubmatch(b)
	require.NotNil(t, m, "%s in go.mod", expr)
	return string(m[1])
}

// byTopic groups lines by what comes before their first colon.
func byTopic(lines []string) map[string][]string {
	out := map[string][]string{}
	for _, l := range lines {
		topic, _, _ := strings.Cut(l, ":")
		out[topic] = append(out[topic], l)
	}
	return out
}

func keys(m map[string][]string) []string { return slices.Sorted(maps.Keys(m)) }
