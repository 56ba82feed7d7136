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
