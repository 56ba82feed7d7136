package main

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// rmqdLayers ranks rmqd's internal packages: a package imports only
// packages of a lower rank, so api and admin (equal rank) never import
// each other and nothing below service reaches up into the routes.
var rmqdLayers = map[string]int{
	"encode": 0, "gc": 0, "ids": 0, "logbuf": 0, "metrics": 0, "names": 0, "params": 0, "redact": 0,
	"respond": 1, "forward": 1,
	"quota": 2, "pull": 2,
	"auth":    3,
	"service": 4,
	"api":     5, "admin": 5,
}

func TestInternalPackagesImportDownwardOnly(t *testing.T) {
	const internal = "github.com/rmq-go/rmq/cmd/rmqd/internal/"
	files, err := filepath.Glob("internal/*/*.go")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	seen := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue // a test imports what it needs; the compiler refuses a cycle
		}
		pkg := filepath.Base(filepath.Dir(f))
		seen[pkg] = true
		rank, ok := rmqdLayers[pkg]
		require.True(t, ok, "package %s has no layer in rmqdLayers", pkg)
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			dep, ok := strings.CutPrefix(path, internal)
			if !ok {
				continue
			}
			require.Less(t, rmqdLayers[dep], rank, "%s (layer %d) imports %s (layer %d)", f, rank, dep, rmqdLayers[dep])
		}
	}
	for pkg := range rmqdLayers {
		require.True(t, seen[pkg], "rmqdLayers names %s, which has no files", pkg)
	}
}
