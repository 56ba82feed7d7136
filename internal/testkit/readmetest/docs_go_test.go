package readmetest

import (
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/zkserver/zktest"
)

// goSetup is what a docs page's Go fragment takes as given: the package
// level declarations of the names it uses without declaring them (a
// client, a topic, a context), and code run after it that checks what the
// page claims about it. A fragment with init also runs: init gives the
// names real values (a client of the test's redis-server, through the
// docenv package of the wrapper module) and may return an error, after
// returns one when the page's claim does not hold.
// replace names a literal of the fragment and the expression it runs with
// (the page's Redis or ZooKeeper addresses: the test's servers instead).
type goSetup struct {
	given, init, after string
	replace            []string // old, new, ...
}

// goSetups holds a setup for every block marked <!-- doc-test: go NAME -->
// in docs/*.md, by NAME. A new fragment needs an entry; an entry no page
// uses any more fails the test too.
var goSetups = map[string]goSetup{
	"api-setup": {given: `var (
	logger      *slog.Logger
	listener    consumer.MessageListener
	ctx         context.Context
	shutdownCtx context.Context
)`, replace: []string{`"127.0.0.1:6379"`, "docenv.Addr()"},
		init: `logger = slog.New(slog.DiscardHandler)
	listener = consumer.ListenerFunc(func(context.Context, *consumer.Message) error { return nil })
	ctx, shutdownCtx = context.Background(), context.Background()`,
		after: `if err != nil { return err }`},
	"api-fixedtime": {given: `var (
	ctx    context.Context
	p      *producer.Producer
	orders topic.Topic
	body   []byte
)`, init: `ctx, body = context.Background(), []byte("order 42")
	orders = topic.MustNew("orders", topic.FixedTime, 16)
	p = docenv.Client("api-fixedtime").Producer()`,
		after: `if err != nil || where != producer.RemovedWaiting {
	return fmt.Errorf("Remove: %v, %v; the page says RemovedWaiting", where, err)
}`},
	"api-rangemerge": {given: `var (
	ctx    context.Context
	p      *producer.Producer
	prices topic.Topic
)`, init: `ctx, prices = context.Background(), topic.MustNew("prices", topic.RangeMerge, 16)
	p = docenv.Client("api-rangemerge").Producer()`,
		after: `if err != nil { return err }`},
	"api-priority": {given: `var (
	ctx  context.Context
	p    *producer.Producer
	jobs topic.Topic
	body []byte
)`, init: `ctx, body, jobs = context.Background(), []byte("job"), topic.MustNew("jobs", topic.Priority, 4)
	p = docenv.Client("api-priority").Producer()`,
		after: `if err != nil || 100 < topic.MinPriority { return fmt.Errorf("%v (MinPriority %d)", err, topic.MinPriority) }`},
	// The page's Message is consumer.Message field for field: a conversion
	// between struct types compiles only when their fields are the same,
	// in the same order, of the same types.
	// Compile-only: a type, checked by the conversion.
	"api-message": {after: `_ = Message(consumer.Message{})`},
	"api-inspector": {given: `var (
	ctx    context.Context
	client *rmq.Client
	orders topic.Topic
)`, init: `ctx, orders = context.Background(), topic.MustNew("orders", topic.FixedTime, 8)
	client = docenv.Client("api-inspector")
	if err := docenv.MakeDead("api-inspector", orders, "order-1001", "order-1002", "order-1003"); err != nil { return err }`,
		// Read before the repairs: three dead on one page; then the
		// requeues bring all three back, waiting.
		after: `if len(page) != 3 || len(more) != 0 || m.ID != "order-1002" || st.Dead != 3 || len(all) != 1 || len(topics) != 1 || len(waiting) != 3 {
	return fmt.Errorf("dead page %d, next %d, dead message %q, stats %+v, %d stats, %d topics, waiting %d", len(page), len(more), m.ID, st, len(all), len(topics), len(waiting))
}`},
	"dashboard-mount": {given: `var (
	rdb          *redis.Client
	requireAdmin func(http.Handler) http.Handler
	zkServers    []string
)`, init: `rdb = docenv.Redis()
	requireAdmin = func(h http.Handler) http.Handler { return h }`,
		after: `if err != nil { return err }
rec := httptest.NewRecorder()
mux.ServeHTTP(rec, httptest.NewRequest("GET", "/rmq/", nil))
if rec.Code != http.StatusOK { return fmt.Errorf("GET /rmq/: %d", rec.Code) }`},
	// Compile-only: option values, which the Register and send fragments
	// use; the flow tests of package rmq run them.
	"flow-options": {},
	"jobs-options": {given: `var (
	ctx  context.Context
	p    *producer.Producer
	jobs topic.Topic
	body []byte
	tp   string
)`, init: `ctx, body, jobs = context.Background(), []byte("job"), topic.MustNew("jobs", topic.Priority, 4)
	tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	p = docenv.Client("jobs-options").Producer()`,
		after: `if err != nil { return err }`},
	// Compile-only: a listener's return statements.
	"jobs-outcomes": {given: `var err error`},
	"jobs-pause": {given: `var (
	ctx    context.Context
	client *rmq.Client
	jobs   topic.Topic
)`, init: `ctx, jobs = context.Background(), topic.MustNew("jobs", topic.Priority, 4)
	client = docenv.Client("jobs-pause")`,
		after: `if err != nil { return err }
if paused, err := client.Inspector().Paused(ctx, jobs); err != nil || paused { return fmt.Errorf("paused after Resume: %v, %v", paused, err) }`},
	"jobs-pull": {given: `var (
	ctx            context.Context
	client         *rmq.Client
	urgent, normal topic.Topic
	id             string
)

func work([]byte) error { return nil }`, init: `ctx = context.Background()
	urgent, normal = topic.MustNew("urgent", topic.FixedTime, 4), topic.MustNew("normal", topic.FixedTime, 4)
	client = docenv.Client("jobs-pull")
	if err := client.Start(ctx); err != nil { return err }
	defer client.Close(ctx)
	if _, err := client.Producer().SendFixedTime(ctx, normal, []byte("n"), time.Now(), producer.WithKey("n1")); err != nil { return err }
	if _, err := client.Producer().SendFixedTime(ctx, urgent, []byte("u"), time.Now(), producer.WithKey("u1")); err != nil { return err }
	id = "n1"`,
		after: `if err != nil || len(ds) != 2 || ds[0].ID != "u1" || ok { return fmt.Errorf("pulled %d (first topic's first), NackByID %v, %v", len(ds), ok, err) }`},
	"jobs-middleware": {given: `var (
	rdb     *redis.Client
	jobs    topic.Topic
	handler consumer.MessageListener
)

func timing(l consumer.MessageListener) consumer.MessageListener { return l }`, init: `rdb, jobs = docenv.Redis(), topic.MustNew("jobs", topic.Priority, 4)
	handler = consumer.ListenerFunc(func(context.Context, *consumer.Message) error { return nil })`},
	"prometheus": {given: `var rdb *redis.Client`, init: `rdb = docenv.Redis()`},
	"otel":       {given: `var rdb *redis.Client`, init: `rdb = docenv.Redis()`},
	"schedules": {given: `var (
	ctx     context.Context
	client  *rmq.Client
	berlin  *time.Location
	reports topic.Topic
)`, init: `ctx, reports = context.Background(), topic.MustNew("reports", topic.FixedTime, 4)
	client = docenv.Client("schedules")
	var err error
	if berlin, err = time.LoadLocation("Europe/Berlin"); err != nil { return err }`,
		after: `if err != nil || info.Spec != "30 2 * * *" || id == "" || len(ticks) != 5 || ticks[0].In(berlin).Format("15:04") != "02:30" {
	return fmt.Errorf("Set %v; Get %+v; Trigger %q; ticks %v", err, info, id, ticks)
}
if _, err := s.Get(ctx, "nightly-report"); err == nil { return fmt.Errorf("Get after Remove found the schedule") }`},
	// The page's ZooKeeper ensemble is the test's ZooKeeper server.
	"zookeeper": {given: `var (
	ctx         context.Context
	rdb         *redis.Client
	orderEvents topic.Topic
	handler     consumer.MessageListener
	body        []byte
	at          time.Time
	orderID     string
)`, replace: []string{`[]string{"zk1:2181", "zk2:2181", "zk3:2181"}`, "docenv.ZooKeeper()"},
		init: `ctx, rdb, body, at, orderID = context.Background(), docenv.Redis(), []byte("paid"), time.Now().Add(time.Hour), "order-42"
	orderEvents = topic.MustNew("order-events", topic.FixedTime, 8)
	handler = consumer.ListenerFunc(func(context.Context, *consumer.Message) error { return nil })`,
		after: `if err != nil { return err }
defer c.Close(ctx)
if st, err := c.Inspector().Stats(ctx, orderEvents); err != nil || st.Store != 1 { return fmt.Errorf("after the send: %+v, %v", st, err) }`},
	// Compile-only: it needs an SQL database.
	"zookeeper-epoch": {given: `var (
	ctx context.Context
	db  *sql.DB
	m   *consumer.Message
)

func status(*consumer.Message) string  { return "" }
func orderID(*consumer.Message) string { return "" }`},
}

// importPaths are the packages a fragment may use without importing them,
// by the name it uses.
var importPaths = map[string]string{
	"context":    "context",
	"errors":     "errors",
	"fmt":        "fmt",
	"http":       "net/http",
	"slog":       "log/slog",
	"sql":        "database/sql",
	"time":       "time",
	"redis":      "github.com/redis/go-redis/v9",
	"rmq":        "github.com/rmq-go/rmq/rmq",
	"producer":   "github.com/rmq-go/rmq/producer",
	"consumer":   "github.com/rmq-go/rmq/consumer",
	"topic":      "github.com/rmq-go/rmq/topic",
	"slots":      "github.com/rmq-go/rmq/slots",
	"dashboard":  "github.com/rmq-go/rmq/cmd/dashboard",
	"prometheus": "github.com/prometheus/client_golang/prometheus",
	"rmqprom":    "github.com/rmq-go/rmq/x/prometheus",
	"rmqotel":    "github.com/rmq-go/rmq/x/otel",
	"httptest":   "net/http/httptest",
	"docenv":     "example.com/docs/docenv",
}

// docenv is the wrapper module's package that gives running fragments a
// real Redis (REDIS_URL) and clients of their own key prefix.
const docenv = `package docenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

var rdb *redis.Client

// Redis returns a client of the redis-server REDIS_URL names.
func Redis() *redis.Client {
	if rdb == nil {
		opt, err := redis.ParseURL(os.Getenv("REDIS_URL"))
		if err != nil {
			panic(err)
		}
		rdb = redis.NewClient(opt)
	}
	return rdb
}

func opts(prefix string) []rmq.Option {
	return []rmq.Option{rmq.WithPrefix("docs-" + prefix), rmq.WithLogger(slog.New(slog.DiscardHandler))}
}

// Addr returns the address of the redis-server REDIS_URL names.
func Addr() string { return Redis().Options().Addr }

// ZooKeeper returns the ZooKeeper server ZK_ADDR names.
func ZooKeeper() []string { return []string{os.Getenv("ZK_ADDR")} }

// Client returns a client of the key prefix docs-PREFIX, logging nothing.
func Client(prefix string) *rmq.Client {
	c, err := rmq.New(Redis(), opts(prefix)...)
	if err != nil {
		panic(err)
	}
	return c
}

// MakeDead sends ids to t under docs-PREFIX, due now, one after another,
// each once the one before has died in a client whose listener fails and
// that retries none: they die in the order given.
func MakeDead(prefix string, t topic.Topic, ids ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := rmq.New(Redis(), opts(prefix)...)
	if err != nil {
		return err
	}
	fail := consumer.ListenerFunc(func(context.Context, *consumer.Message) error { return errors.New("payment service unavailable") })
	if err := c.Register(t, fail, consumer.WithMaxRetries(0)); err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	defer c.Close(ctx)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for i, id := range ids {
		if _, err := c.Producer().SendFixedTime(ctx, t, []byte(id), time.Now(), producer.WithKey(id)); err != nil {
			return err
		}
		for {
			st, err := c.Inspector().Stats(ctx, t)
			if err == nil && st.Dead == int64(i+1) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s did not die: %v", id, ctx.Err())
			case <-tick.C:
			}
		}
	}
	return nil
}
`

// Every Go block of docs/*.md compiles as written, against this tree, in a
// module of its own that requires the project's modules as a user's
// would. The pages show fragments (a send, a set of options), so each is
// the body of a function in a package of its own, after the declarations
// its setup gives, with the imports it uses added; the names it declares
// are used once more at its end, since the page needs not use them all.
// The fragments whose setup has an init then run, one after another,
// against a real redis-server, and each checks what its page says of it.
// The others are compile-only, each for a reason its setup tells.
func TestDocsGoBlocks(t *testing.T) {
	root, err := Root()
	require.NoError(t, err)
	blocks := docBlocks(t, root, "go")
	require.NotEmpty(t, blocks)

	dir := t.TempDir()
	writeUserModule(t, root, dir)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "docenv"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "docenv", "docenv.go"), []byte(docenv), 0o644))
	seen := map[string]bool{}
	var runnable []string
	for _, b := range blocks {
		require.Equal(t, "go", b.Lang, "%s: a block marked go is a go block", b.where())
		require.Len(t, b.Args, 1, "%s: <!-- doc-test: go NAME -->", b.where())
		name := b.Args[0]
		require.False(t, seen[name], "%s: a second block named %s", b.where(), name)
		seen[name] = true
		setup, ok := goSetups[name]
		require.True(t, ok, "%s: no setup for %s in goSetups", b.where(), name)
		src, err := wrapFragment(name, b.Text, setup)
		require.NoError(t, err, "%s", b.where())
		pkg := filepath.Join(dir, strings.ReplaceAll(name, "-", "_"))
		require.NoError(t, os.MkdirAll(pkg, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(pkg, "snippet.go"), []byte("// "+b.where()+"\n"+src), 0o644))
		if setup.init != "" {
			runnable = append(runnable, name)
		}
	}
	for name := range goSetups {
		require.True(t, seen[name], "goSetups has %s, which no page marks", name)
	}
	sort.Strings(runnable)
	var main strings.Builder
	main.WriteString("package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n")
	for _, name := range runnable {
		fmt.Fprintf(&main, "\t%s \"example.com/docs/%s\"\n", strings.ReplaceAll(name, "-", "_"), strings.ReplaceAll(name, "-", "_"))
	}
	main.WriteString(")\n\nfunc main() {\n\tfailed := false\n")
	for _, name := range runnable {
		fmt.Fprintf(&main, "\tif err := %s.Run(); err != nil {\n\t\tfmt.Printf(\"FAIL %s: %%v\\n\", err)\n\t\tfailed = true\n\t} else {\n\t\tfmt.Println(\"ok %s\")\n\t}\n",
			strings.ReplaceAll(name, "-", "_"), name, name)
	}
	main.WriteString("\tif failed {\n\t\tos.Exit(1)\n\t}\n}\n")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "run"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run", "main.go"), []byte(main.String()), 0o644))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off")
	cmd := exec.CommandContext(ctx, "go", "build", "./...")
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the docs' Go blocks (each file names its page and line):\n%s\n%s", out, listing(t, dir))
	bin := filepath.Join(dir, "docs-run")
	cmd = exec.CommandContext(ctx, "go", "build", "-o", bin, "./run")
	cmd.Dir, cmd.Env = dir, env
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)

	srv := redistest.Start(t, redisserver.Config{})
	cmd = exec.CommandContext(ctx, bin)
	zk := zktest.Start(t)
	cmd.Env = append(WithoutRedisVars(os.Environ()), "REDIS_URL=redis://"+srv.Addr()+"/0", "ZK_ADDR="+zk.Addr())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr // stderr: the clients' logs
	err = cmd.Run()
	out = stdout.Bytes()
	require.NoError(t, err, "the docs' Go blocks that run:\n%s\nstderr:\n%s", out, &stderr)
	var want []string
	for _, name := range runnable {
		want = append(want, "ok "+name)
	}
	require.Equal(t, want, Lines(string(out)))
	t.Logf("%d Go blocks of docs/*.md compiled, %d of them ran: %s", len(blocks), len(runnable), strings.Join(runnable, ", "))
}

// docBlock is a marked block of a page under docs/.
type docBlock struct {
	Fence
	Page string // file name under docs/
}

func (b docBlock) where() string { return fmt.Sprintf("docs/%s:%d", b.Page, b.Line) }

// docBlocks returns the blocks of docs/*.md marked kind, page by page.
func docBlocks(t *testing.T, root, kind string) []docBlock {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	var out []docBlock
	for _, page := range pages {
		text, err := os.ReadFile(page)
		require.NoError(t, err)
		fences, err := Fences(text, DocMarker)
		require.NoError(t, err, "%s", page)
		for _, f := range fences {
			if f.Name == kind {
				out = append(out, docBlock{Fence: f, Page: filepath.Base(page)})
			}
		}
	}
	return out
}

// writeUserModule writes go.mod and go.sum of a module that requires
// every module of the workspace (but the benchmark) through replace
// directives, as a user's module requires the published ones.
func writeUserModule(t *testing.T, root, dir string) {
	t.Helper()
	work, err := os.ReadFile(filepath.Join(root, "go.work"))
	require.NoError(t, err)
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	var req, repl, sums strings.Builder
	for _, m := range regexp.MustCompile(`(?m)^\s+(\.\S*)$`).FindAllStringSubmatch(string(work), -1) {
		if m[1] == "./bench" {
			continue
		}
		modDir := filepath.Join(root, m[1])
		mod, err := os.ReadFile(filepath.Join(modDir, "go.mod"))
		require.NoError(t, err)
		path := submatch(t, mod, `(?m)^module (\S+)$`)
		fmt.Fprintf(&req, "\t%s v0.0.0\n", path)
		fmt.Fprintf(&repl, "replace %s => %s\n", path, modDir)
		sum, err := os.ReadFile(filepath.Join(modDir, "go.sum"))
		require.NoError(t, err)
		sums.Write(sum)
	}
	mod := fmt.Sprintf("module example.com/docs\n\ngo %s\n\nrequire (\n\tgithub.com/redis/go-redis/v9 %s\n%s)\n\n%s",
		submatch(t, gomod, `(?m)^go (\S+)$`), submatch(t, gomod, `(?m)^\s*github\.com/redis/go-redis/v9 (\S+)`), req.String(), repl.String())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), []byte(sums.String()), 0o644))
}

var importDecl = regexp.MustCompile(`(?s)^\s*import\s*(\([^)]*\)|"[^"]*"|\w+\s+"[^"]*")\s*\n`)

// wrapFragment makes a Go file of a page's fragment: its own import
// declarations first, the setup's declarations, then the rest as the body
// of func snippet() error.
func wrapFragment(name, text string, s goSetup) (string, error) {
	var imports []string
	for {
		m := importDecl.FindStringSubmatch(text)
		if m == nil {
			break
		}
		imports = append(imports, "import "+m[1])
		text = text[len(m[0]):]
	}
	for i := 0; i+1 < len(s.replace); i += 2 {
		if !strings.Contains(text, s.replace[i]) {
			return "", fmt.Errorf("%s: the fragment has no %s to replace", name, s.replace[i])
		}
		text = strings.ReplaceAll(text, s.replace[i], s.replace[i+1])
	}
	body := text + "\n" + s.after + "\n"
	pkg := "package doc_" + strings.ReplaceAll(name, "-", "_") + "\n\n"
	run := ""
	if s.init != "" {
		run = "\n// Run gives the fragment's names real values and runs it.\nfunc Run() error {\n" + s.init + "\nreturn snippet()\n}\n"
	}
	draft := pkg + strings.Join(imports, "\n") + "\n\n" + s.given + "\n\nfunc snippet() error {\n" + body + "return nil\n}\n" + run
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "snippet.go", draft, parser.SkipObjectResolution)
	if err != nil {
		return "", fmt.Errorf("parse: %w\n%s", err, draft)
	}
	imported := map[string]bool{}
	for _, is := range f.Imports {
		p := strings.Trim(is.Path.Value, `"`)
		n := p[strings.LastIndex(p, "/")+1:]
		if is.Name != nil {
			n = is.Name.Name
		}
		imported[n] = true
	}
	// The package names the fragment and its setup use, and the names its
	// body declares at its top level.
	var uses, declared []string
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && importPaths[id.Name] != "" && !imported[id.Name] && !slices.Contains(uses, id.Name) {
				uses = append(uses, id.Name)
			}
		}
		return true
	})
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "snippet" {
			continue
		}
		for _, st := range fn.Body.List {
			switch st := st.(type) {
			case *ast.AssignStmt:
				if st.Tok == token.DEFINE {
					for _, e := range st.Lhs {
						if id, ok := e.(*ast.Ident); ok && id.Name != "_" && !slices.Contains(declared, id.Name) {
							declared = append(declared, id.Name)
						}
					}
				}
			case *ast.DeclStmt:
				if g, ok := st.Decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
					for _, sp := range g.Specs {
						for _, id := range sp.(*ast.ValueSpec).Names {
							declared = append(declared, id.Name)
						}
					}
				}
			}
		}
	}
	sort.Strings(uses)
	for _, u := range uses {
		imports = append(imports, fmt.Sprintf("import %s %q", u, importPaths[u]))
	}
	var tail strings.Builder
	for _, d := range declared {
		fmt.Fprintf(&tail, "_ = %s\n", d)
	}
	return pkg + strings.Join(imports, "\n") + "\n\n" + s.given + "\n\nfunc snippet() error {\n" + body + tail.String() + "return nil\n}\n" + run, nil
}

// listing returns the generated files with line numbers, for a failure.
func listing(t *testing.T, dir string) string {
	files, err := filepath.Glob(filepath.Join(dir, "*", "snippet.go"))
	require.NoError(t, err)
	var b strings.Builder
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		rel, _ := filepath.Rel(dir, f)
		fmt.Fprintf(&b, "== %s\n", rel)
		for i, l := range strings.Split(string(src), "\n") {
			fmt.Fprintf(&b, "%3d %s\n", i+1, l)
		}
	}
	return b.String()
}
