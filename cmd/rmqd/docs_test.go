package main

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/readmetest"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

// docBlock is a block of a page under docs/ and where it is.
type docBlock struct {
	readmetest.Fence
	page string
}

// docBlocks returns the blocks of docs/*.md and cmd/rmqd/README.md marked
// <!-- doc-test: kind -->, by page (its path from the repository's root).
func docBlocks(t *testing.T, kind string) map[string][]docBlock {
	t.Helper()
	root, err := readmetest.Root()
	require.NoError(t, err)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	pages = append(pages, filepath.Join(root, "cmd", "rmqd", "README.md"))
	out := map[string][]docBlock{}
	for _, page := range pages {
		text, err := os.ReadFile(page)
		require.NoError(t, err)
		fences, err := readmetest.Fences(text, readmetest.DocMarker)
		require.NoError(t, err, "%s", page)
		for _, f := range fences {
			if f.Name == kind {
				rel, err := filepath.Rel(root, page)
				require.NoError(t, err)
				out[rel] = append(out[rel], docBlock{f, rel})
			}
		}
	}
	return out
}

// The curl sessions of docs/*.md (blocks marked rmqd) run as written,
// each page's blocks in order as one shell session, against a fresh
// `rmqd --dev` per page: the tokens and queues they use are the ones they
// make, and each command prints what its #> lines say.
func TestDocsRmqdSessions(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "the docs' sessions need %s (scripts/test.sh installs it)", tool)
	}
	pages := docBlocks(t, "rmqd")
	require.NotEmpty(t, pages, "docs/*.md blocks marked rmqd")
	for page, blocks := range pages {
		t.Run(page, func(t *testing.T) {
			d := startDevRmqd(t)
			var bs []readmetest.Block
			for _, b := range blocks {
				bs = append(bs, b.Block)
			}
			addrs := strings.NewReplacer("127.0.0.1:7777", d.api, "127.0.0.1:7778", d.admin)
			runSession(t, page, bs, addrs, t.TempDir(), nil, 3*time.Minute)
		})
	}
}

// The rmqd command lines of docs/*.md (blocks marked rmqd-flags) are
// rmqd's: each one's flags and variables parse, and each that names a
// Redis is started against real servers standing in for the ones it names
// (a plain one, a TLS one with a password, a cluster, a second pool), and
// serves a publish through a token of each pool it names. `--dev` is left
// to the README's session, which starts it.
func TestDocsRmqdCommands(t *testing.T) {
	pages := docBlocks(t, "rmqd-flags")
	require.NotEmpty(t, pages, "docs/*.md blocks marked rmqd-flags")

	var servers struct {
		plain, eu, tls *redisserver.Server
		cluster        *redisserver.Cluster
		ca             string
	}
	// Started on first use: a page without a TLS line starts no TLS server.
	plain := func() *redisserver.Server {
		if servers.plain == nil {
			servers.plain = redistest.Start(t, redisserver.Config{})
		}
		return servers.plain
	}
	replacements := []struct {
		doc string
		now func() string
	}{
		{"redis://127.0.0.1:6379/0", func() string { return "redis://" + plain().Addr() + "/0" }},
		{"rediss://user:pass@redis.example:6380/0", func() string {
			files := redistest.TLSFiles(t)
			servers.ca = files.CAFile
			servers.tls = redistest.Start(t, redisserver.Config{TLS: &files, Password: "pass"})
			return "rediss://:pass@" + servers.tls.Addr() + "/0"
		}},
		{"ca.pem", func() string { return servers.ca }},
		{"redis://redis-a:7000,redis://redis-b:7000", func() string {
			servers.cluster = redistest.SharedCluster(t)
			addrs := servers.cluster.Addrs()
			return "redis://" + addrs[0] + ",redis://" + addrs[1]
		}},
		{"redis://redis-eu:6379/0", func() string {
			servers.eu = redistest.Start(t, redisserver.Config{})
			return "redis://" + servers.eu.Addr() + "/0"
		}},
	}

	started := 0
	for page, blocks := range pages {
		for _, b := range blocks {
			for i, line := range strings.Split(strings.TrimSuffix(b.Text, "\n"), "\n") {
				at := page + ":" + strconv.Itoa(b.Line+1+i)
				if c, _, ok := strings.Cut(line, "#"); ok {
					line = c
				}
				words := strings.Fields(line)
				env := map[string]string{}
				for len(words) > 0 && strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-") {
					k, v, _ := strings.Cut(words[0], "=")
					env[k] = v
					words = words[1:]
				}
				var args []string
				switch {
				case strings.Join(words, " ") == "go build -o rmqd ./cmd/rmqd":
					// rmqdBinary builds this package so.
					continue
				case len(words) >= 3 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/rmqd":
					args = words[3:]
				case len(words) >= 1 && words[0] == "./rmqd":
					args = words[1:]
				default:
					t.Fatalf("%s: not an rmqd command: %q", at, line)
				}
				_, err := parseConfig(args, func(k string) string { return env[k] }, io.Discard)
				require.NoError(t, err, "%s: %q", at, line)
				if len(args) == 1 && args[0] == "--dev" {
					continue
				}

				// The servers the line names, real ones; the listeners on
				// free ports (startRmqd's).
				joined := strings.Join(args, " ")
				envURL := env["REDIS_URL"]
				for _, r := range replacements {
					if strings.Contains(joined, r.doc) || strings.Contains(envURL, r.doc) {
						v := r.now()
						joined, envURL = strings.ReplaceAll(joined, r.doc, v), strings.ReplaceAll(envURL, r.doc, v)
					}
				}
				args = withoutListeners(strings.Fields(joined))
				redisURL := "redis://" + plain().Addr() + "/0" // the default pool when the line names none
				if envURL != "" {
					// startRmqd names the default pool by flag, which wins
					// over the variable: the line's variable was parsed
					// above, and it names the same server.
					redisURL = envURL
				}
				if u, ok := flagValue(args, "--redis-url"); ok {
					redisURL = u
				}
				p := startRmqd(t, redisURL, nil, args...)
				started++
				pools := []string{""}
				if strings.Contains(line, "--pool eu=") {
					pools = append(pools, "eu")
				}
				for _, pool := range pools {
					q := "q" + strconv.Itoa(started)
					tok := publishThrough(t, p, pool, q)
					r := do(t, "GET", p.api+"/api/docs/"+q+"/size", "", "X-Token: "+tok)
					require.Equal(t, http.StatusOK, r.status, "%s: %s", at, r)
					require.Contains(t, string(r.body), `"size":1`, "%s: pool %q", at, pool)
				}
				require.Equal(t, 0, p.stop(t), "%s", at)
			}
		}
	}
	require.NotNil(t, servers.tls, "the docs' TLS line was started")
	require.NotNil(t, servers.cluster, "the docs' cluster line was started")
	require.NotNil(t, servers.eu, "the docs' pool line was started")
	t.Logf("%d rmqd command lines of docs/*.md started", started)
}

// publishThrough makes a token of namespace "docs" in pool ("" the default)
// and publishes one job to queue q with it; it returns the token as a
// client names it.
func publishThrough(t *testing.T, p *rmqdProc, pool, q string) string {
	t.Helper()
	path := p.admin + "/token/docs?description=docs"
	if pool != "" {
		path += "&pool=" + pool
	}
	r := do(t, "POST", path, "")
	require.Equal(t, http.StatusCreated, r.status, "%s", r)
	var tok map[string]string
	r.json(t, &tok)
	token := tok["token"]
	if pool != "" && !strings.HasPrefix(token, pool+":") {
		token = pool + ":" + token
	}
	r = do(t, "PUT", p.api+"/api/docs/"+q, "job", "X-Token: "+token)
	require.Equal(t, http.StatusCreated, r.status, "%s", r)
	return token
}

// withoutListeners drops --listen and --admin-listen and their values:
// startRmqd puts the listeners on free ports.
func withoutListeners(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--listen" || args[i] == "--admin-listen" {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}
