package readmetest

import (
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
)

// goSetup is what a docs page's Go fragment takes as given: the package
// level declarations of the names it uses without declaring them (a
// client, a topic, a context), and code run after it that checks what the
// page claims about it.
type goSetup struct{ given, after string }

// goSetups holds a setup for every block marked <!-- doc-test: go NAME -->
// in docs/*.md, by NAME. A new fragment needs an entry; an entry no page
// uses any more fails the test too.
var goSetups = map[string]goSetup{
	"api-setup": {given: `var (
	logger      *slog.Logger
	listener    consumer.MessageListener
	ctx         context.Context
	shutdownCtx context.Context
)`},
	"api-fixedtime": {given: `var (
	ctx    context.Context
	p      *producer.Producer
	orders topic.Topic
	body   []byte
)`, after: `_ = where == producer.RemovedWaiting`},
	"api-rangemerge": {given: `var (
	ctx    context.Context
	p      *producer.Producer
	prices topic.Topic
)`},
	"api-priority": {given: `var (
	ctx  context.Context
	p    *producer.Producer
	jobs topic.Topic
	body []byte
)`, after: `_ = topic.MinPriority`},
	// The page's Message is consumer.Message field for field: a conversion
	// between struct types compiles only when their fields are the same,
	// in the same order, of the same types.
	"api-message": {after: `_ = Message(consumer.Message{})`},
	"api-inspector": {given: `var (
	ctx    context.Context
	client *rmq.Client
	orders topic.Topic
)`},
	"dashboard-mount": {given: `var (
	rdb          *redis.Client
	requireAdmin func(http.Handler) http.Handler
	zkServers    []string
)`},
	"flow-options": {},
	"jobs-options": {given: `var (
	ctx  context.Context
	p    *producer.Producer
	jobs topic.Topic
	body []byte
	tp   string
)`},
	"jobs-outcomes": {given: `var err error`},
	"jobs-pause": {given: `var (
	ctx    context.Context
	client *rmq.Client
	jobs   topic.Topic
)`},
	"jobs-pull": {given: `var (
	ctx            context.Context
	client         *rmq.Client
	urgent, normal topic.Topic
	id             string
)

func work([]byte) error { return nil }`},
	"jobs-middleware": {given: `var (
	rdb     *redis.Client
	jobs    topic.Topic
	handler consumer.MessageListener
)

func timing(l consumer.MessageListener) consumer.MessageListener { return l }`},
	"prometheus": {given: `var rdb *redis.Client`},
	"otel":       {given: `var rdb *redis.Client`},
	"schedules": {given: `var (
	ctx     context.Context
	client  *rmq.Client
	berlin  *time.Location
	reports topic.Topic
)`},
	"zookeeper": {given: `var (
	ctx         context.Context
	rdb         *redis.Client
	orderEvents topic.Topic
	handler     consumer.MessageListener
	body        []byte
	at          time.Time
	orderID     string
)`},
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
}

// Every Go block of docs/*.md compiles as written, against this tree, in a
// module of its own that requires the project's modules as a user's
// would. The pages show fragments (a send, a set of options), so each is
// the body of a function in a package of its own, after the declarations
// its setup gives, with the imports it uses added; the names it declares
// are used once more at its end, since the page needs not use them all.
func TestDocsGoBlocksCompile(t *testing.T) {
	root, err := Root()
	require.NoError(t, err)
	blocks := docBlocks(t, root, "go")
	require.NotEmpty(t, blocks)

	dir := t.TempDir()
	writeUserModule(t, root, dir)
	seen := map[string]bool{}
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
	}
	for name := range goSetups {
		require.True(t, seen[name], "goSetups has %s, which no page marks", name)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "vet", "-unreachable=false", "-copylocks=false", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the docs' Go blocks (each file names its page and line):\n%s\n%s", out, listing(t, dir))
	t.Logf("%d Go blocks of docs/*.md compiled", len(blocks))
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
	body := text + "\n" + s.after + "\n"
	pkg := "package doc_" + strings.ReplaceAll(name, "-", "_") + "\n\n"
	draft := pkg + strings.Join(imports, "\n") + "\n\n" + s.given + "\n\nfunc snippet() error {\n" + body + "return nil\n}\n"
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
	return pkg + strings.Join(imports, "\n") + "\n\n" + s.given + "\n\nfunc snippet() error {\n" + body + tail.String() + "return nil\n}\n", nil
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
