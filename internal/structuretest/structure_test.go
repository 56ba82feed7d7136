package structuretest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/rmq-go/rmq"

// publicPackages are the packages a program imports; what they export is
// the module's API.
var publicPackages = []string{
	module + "/rmq",
	module + "/producer",
	module + "/consumer",
	module + "/topic",
	module + "/slots",
}

// testkit is the folder of the test rigs: the internal packages that start
// real servers or whole clients for tests, examples and the demo. They may
// import package rmq, which no other internal package may (the public
// packages sit on top), and nothing of the library may import them.
const testkit = "testkit/"

// listed is what `go list -json` says of a package.
type listed struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Export     string
	Deps       []string
	Imports    []string
	Standard   bool
}

// goList runs go list -json with args and decodes its stream of packages.
func goList(t *testing.T, args ...string) []listed {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	var pkgs []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// exportImporter imports pkgs and their dependencies from the compiler's
// export data, which go list -export builds.
func exportImporter(t *testing.T, fset *token.FileSet, pkgs ...string) types.Importer {
	t.Helper()
	exports := map[string]string{}
	for _, p := range goList(t, append([]string{"-export", "-deps"}, pkgs...)...) {
		exports[p.ImportPath] = p.Export
	}
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
}

func isInternal(path string) bool {
	return strings.HasPrefix(path, module+"/internal/") || path == module+"/internal"
}

// TestPublicSignaturesNameNoInternalType type-checks the public packages
// (from the compiler's export data, which holds everything they export)
// and walks every exported identifier: the types of funcs' parameters and
// results, of exported struct fields, of exported methods (declared or
// promoted), of vars and consts, type definitions and aliases, type
// parameters' constraints. Unexported fields and methods are not API, so a
// sealed interface (one whose only method is an unexported one of an
// internal package) passes.
func TestPublicSignaturesNameNoInternalType(t *testing.T) {
	imp := exportImporter(t, token.NewFileSet(), publicPackages...)
	var found []string
	for _, path := range publicPackages {
		pkg, err := imp.Import(path)
		if err != nil {
			t.Fatalf("import %s: %v", path, err)
		}
		found = append(found, leaks(pkg)...)
	}
	sort.Strings(found)
	for _, f := range found {
		t.Errorf("public API names an internal type: %s", f)
	}
}

// leaks lists where pkg's exported identifiers name internal types.
func leaks(pkg *types.Package) []string {
	var found []string
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		where := pkg.Path() + "." + name
		w := walker{report: func(at string, n *types.TypeName) {
			found = append(found, fmt.Sprintf("%s%s: %s.%s", where, at, n.Pkg().Path(), n.Name()))
		}}
		switch o := obj.(type) {
		case *types.TypeName:
			if a, ok := o.Type().(*types.Alias); ok {
				w.typ(a.Rhs(), " (alias)")
				continue
			}
			named, ok := o.Type().(*types.Named)
			if !ok {
				continue
			}
			if tps := named.TypeParams(); tps != nil {
				for i := range tps.Len() {
					w.typ(tps.At(i).Constraint(), " (type parameter)")
				}
			}
			// An interface's methods are its method set; a pointer to it
			// has none. Other types: the methods of T and *T.
			var ms *types.MethodSet
			if types.IsInterface(named) {
				ms = types.NewMethodSet(named)
			} else {
				w.typ(named.Underlying(), "")
				ms = types.NewMethodSet(types.NewPointer(named))
			}
			for i := range ms.Len() {
				m := ms.At(i).Obj()
				if m.Exported() {
					w.typ(m.Type(), "."+m.Name())
				}
			}
		default: // func, var, const
			w.typ(obj.Type(), "")
		}
	}
	return found
}

// walker reports the internal named types a type mentions. It does not
// enter named types (only their type arguments): a public one is checked
// on its own, a foreign one is not this module's API; so the walk ends
// without a record of where it has been.
type walker struct {
	report func(at string, n *types.TypeName)
}

func (w *walker) typ(t types.Type, at string) {
	switch u := t.(type) {
	case *types.Alias:
		if n := u.Obj(); n.Pkg() != nil && isInternal(n.Pkg().Path()) {
			w.report(at, n)
			return
		}
		w.typ(u.Rhs(), at)
	case *types.Named:
		if n := u.Obj(); n.Pkg() != nil && isInternal(n.Pkg().Path()) {
			w.report(at, n)
		}
		if args := u.TypeArgs(); args != nil {
			for i := range args.Len() {
				w.typ(args.At(i), at)
			}
		}
	case *types.Pointer:
		w.typ(u.Elem(), at)
	case *types.Slice:
		w.typ(u.Elem(), at)
	case *types.Array:
		w.typ(u.Elem(), at)
	case *types.Chan:
		w.typ(u.Elem(), at)
	case *types.Map:
		w.typ(u.Key(), at)
		w.typ(u.Elem(), at)
	case *types.Signature:
		for _, tup := range []*types.Tuple{u.Params(), u.Results()} {
			for i := range tup.Len() {
				w.typ(tup.At(i).Type(), at)
			}
		}
	case *types.Struct:
		for i := range u.NumFields() {
			if f := u.Field(i); f.Exported() {
				w.typ(f.Type(), at+"."+f.Name())
			}
		}
	case *types.Interface:
		for i := range u.NumMethods() {
			if m := u.Method(i); m.Exported() {
				w.typ(m.Type(), at+"."+m.Name())
			}
		}
	case *types.TypeParam:
		w.typ(u.Constraint(), at)
	case *types.Union:
		for i := range u.Len() {
			w.typ(u.Term(i).Type(), at)
		}
	}
}

// TestInternalDoesNotImportRMQ keeps the layering one way: the public
// packages import internal ones, never the reverse, so no internal package
// (directly or through another) depends on package rmq, except the test
// rigs, which build whole clients.
func TestInternalDoesNotImportRMQ(t *testing.T) {
	rmqPkg := module + "/rmq"
	for _, p := range goList(t, module+"/internal/...") {
		rel := strings.TrimPrefix(p.ImportPath, module+"/internal/")
		if strings.HasPrefix(rel, testkit) {
			continue
		}
		if slices.Contains(p.Deps, rmqPkg) {
			t.Errorf("%s depends on %s (imports: %v)", p.ImportPath, rmqPkg, p.Imports)
		}
	}
}

// TestWalkerFindsInternalTypes checks the check: each form of a public
// signature that can carry a type is seen when it names an internal one,
// and a sealed interface is not.
func TestWalkerFindsInternalTypes(t *testing.T) {
	internal := types.NewPackage(module+"/internal/x", "x")
	hidden := types.NewNamed(types.NewTypeName(token.NoPos, internal, "Hidden", nil), types.NewStruct(nil, nil), nil)
	sealed := types.NewInterfaceType([]*types.Func{
		types.NewFunc(token.NoPos, internal, "apply", types.NewSignatureType(nil, nil, nil,
			types.NewTuple(types.NewVar(token.NoPos, internal, "", types.NewPointer(hidden))), nil, false)),
	}, nil).Complete()

	pub := types.NewPackage(module+"/pub", "pub")
	param := func(t types.Type) *types.Tuple { return types.NewTuple(types.NewVar(token.NoPos, pub, "", t)) }
	add := func(o types.Object) { pub.Scope().Insert(o) }
	add(types.NewFunc(token.NoPos, pub, "Param", types.NewSignatureType(nil, nil, nil, param(hidden), nil, false)))
	add(types.NewFunc(token.NoPos, pub, "Result", types.NewSignatureType(nil, nil, nil, nil, param(types.NewSlice(hidden)), false)))
	add(types.NewVar(token.NoPos, pub, "Var", types.NewMap(types.Typ[types.String], hidden)))
	add(types.NewAlias(types.NewTypeName(token.NoPos, pub, "Alias", nil), hidden).Obj())
	field := types.NewStruct([]*types.Var{
		types.NewField(token.NoPos, pub, "Exported", hidden, false),
		types.NewField(token.NoPos, pub, "unexported", hidden, false),
	}, nil)
	st := types.NewNamed(types.NewTypeName(token.NoPos, pub, "Struct", nil), field, nil)
	recv := types.NewVar(token.NoPos, pub, "s", types.NewPointer(st))
	st.AddMethod(types.NewFunc(token.NoPos, pub, "Get", types.NewSignatureType(recv, nil, nil, nil, param(hidden), false)))
	add(st.Obj())
	add(types.NewNamed(types.NewTypeName(token.NoPos, pub, "Func", nil),
		types.NewSignatureType(nil, nil, nil, param(types.NewPointer(hidden)), nil, false), nil).Obj())
	add(types.NewNamed(types.NewTypeName(token.NoPos, pub, "Sealed", nil), sealed, nil).Obj())
	add(types.NewNamed(types.NewTypeName(token.NoPos, pub, "Iface", nil), types.NewInterfaceType([]*types.Func{
		types.NewFunc(token.NoPos, pub, "Do", types.NewSignatureType(nil, nil, nil, nil, param(hidden), false)),
	}, nil).Complete(), nil).Obj())
	add(types.NewFunc(token.NoPos, pub, "Clean", types.NewSignatureType(nil, nil, nil, param(types.Typ[types.Int]), nil, false)))

	got := leaks(pub)
	want := []string{
		module + "/pub.Alias (alias): " + module + "/internal/x.Hidden",
		module + "/pub.Func: " + module + "/internal/x.Hidden",
		module + "/pub.Iface.Do: " + module + "/internal/x.Hidden",
		module + "/pub.Param: " + module + "/internal/x.Hidden",
		module + "/pub.Result: " + module + "/internal/x.Hidden",
		module + "/pub.Struct.Exported: " + module + "/internal/x.Hidden",
		module + "/pub.Struct.Get: " + module + "/internal/x.Hidden",
		module + "/pub.Var: " + module + "/internal/x.Hidden",
	}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("leaks:\n got %q\nwant %q", got, want)
	}
}

// TestLibraryDoesNotImportTestkit keeps the rigs out of what users link:
// no package of the library outside internal/testkit depends on one of
// them (their tests may; go list's Deps covers only non-test imports).
// Programs may: the demo, the bench and rmqd --dev start a throwaway
// redis-server with internal/testkit/redisserver.
func TestLibraryDoesNotImportTestkit(t *testing.T) {
	for _, p := range goList(t, module+"/...") {
		rel := strings.TrimPrefix(p.ImportPath, module+"/")
		if strings.HasPrefix(rel, "internal/"+testkit) || isProgram(rel) {
			continue
		}
		for _, d := range p.Deps {
			if strings.HasPrefix(d, module+"/internal/"+testkit) {
				t.Errorf("%s depends on the test rig %s", p.ImportPath, d)
			}
		}
	}
}

// isProgram tells the module's programs (examples, the bench, cmd/) from
// its library packages.
func isProgram(rel string) bool {
	for _, dir := range []string{"examples", "bench", "cmd"} {
		if rel == dir || strings.HasPrefix(rel, dir+"/") {
			return true
		}
	}
	return false
}

// maxPackageLines bounds a library package (all lines of its non-test .go
// files): past it a package is more than one room, and a reader asking
// where something happens has too much to read.
const maxPackageLines = 3000

// TestLibraryPackagesAreRooms keeps every library package under
// maxPackageLines.
func TestLibraryPackagesAreRooms(t *testing.T) {
	for _, p := range goList(t, module+"/...") {
		rel := strings.TrimPrefix(p.ImportPath, module+"/")
		if strings.HasPrefix(rel, "internal/"+testkit) || isProgram(rel) {
			continue
		}
		lines := 0
		for _, f := range p.GoFiles {
			b, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			lines += bytes.Count(b, []byte("\n"))
		}
		if lines > maxPackageLines {
			t.Errorf("%s has %d non-test lines (at most %d): split it by job", p.ImportPath, lines, maxPackageLines)
		}
	}
}
