package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/internal/testkit/readmetest"
)

// The benchmark commands of docs/*.md (blocks marked bench) are the
// benchmark's: each `go run .` line's flags parse, with the values they
// give, as the benchmark parses them. Running them takes minutes of a
// quiet machine, which a test run is not.
func TestDocsBenchCommands(t *testing.T) {
	root, err := readmetest.Root()
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	parsed := 0
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		fences, err := readmetest.Fences(text, readmetest.DocMarker)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fences {
			if f.Name != "bench" {
				continue
			}
			for i, line := range strings.Split(strings.TrimSuffix(f.Text, "\n"), "\n") {
				at := fmt.Sprintf("docs/%s:%d", filepath.Base(page), f.Line+1+i)
				line, _, _ = strings.Cut(line, "#")
				line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "cd bench"))
				line = strings.TrimSpace(strings.TrimPrefix(line, "&&"))
				if line == "" {
					continue
				}
				args, ok := strings.CutPrefix(line, "go run . ")
				if !ok {
					t.Fatalf("%s: not a `go run .` of the benchmark: %q", at, line)
				}
				if err := parseArgs(strings.Fields(args)); err != nil {
					t.Errorf("%s: %q: %v", at, line, err)
				}
				parsed++
			}
		}
	}
	if parsed == 0 {
		t.Fatal("no bench command lines in docs/*.md")
	}
}

// parseArgs runs parseFlags on args as the command line, on a flag set of
// its own that reports an error instead of exiting.
func parseArgs(args []string) (err error) {
	saved, savedArgs := flag.CommandLine, os.Args
	defer func() { flag.CommandLine, os.Args = saved, savedArgs }()
	flag.CommandLine = flag.NewFlagSet("bench", flag.PanicOnError)
	flag.CommandLine.SetOutput(new(strings.Builder))
	os.Args = append([]string{"bench"}, args...)
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	_, err = parseFlags()
	return err
}

// The test's own check: a flag the benchmark does not have is refused.
func TestParseArgsRefusesUnknownFlags(t *testing.T) {
	if err := parseArgs([]string{"-systems", "rmq", "-runs", "1"}); err != nil {
		t.Error(err)
	}
	for _, bad := range [][]string{{"-no-such-flag"}, {"-cases", "nonsense"}} {
		if parseArgs(bad) == nil {
			t.Errorf("%v parsed", bad)
		}
	}
}
