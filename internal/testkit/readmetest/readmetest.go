// Package readmetest reads the parts of README.md that tests run as
// written: the complete Go program (run by this package's test) and the
// rmqd and rmqctl shell sessions (run by cmd/rmqd's readme_test.go). A part
// is the fenced code block that follows a marker comment
//
//	<!-- readme-test: NAME [anything] -->
//
// and a shell block states what each command prints on the lines after it
// that start with "#> ", where "…" stands for anything that differs from
// run to run. The pages under docs/ mark their blocks the same way with
//
//	<!-- doc-test: KIND [anything] -->
//
// (Fences reads them), and TestDocsBlocksAreMarked refuses a code block of
// docs/*.md that names no test. Like internal/testkit/redisserver it is
// not a test file so that the tests of other modules (cmd, bench, x/...)
// can import it.
package readmetest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Block is one fenced code block of the README.
type Block struct {
	Name string // the marker's name
	Lang string // the fence's info string: go, sh, text
	Text string // the lines between the fences, each ending in "\n"
	Line int    // the line of the opening fence, 1-based
}

const marker = "<!-- readme-test:"

// Root returns the repository's root: the closest directory at or above
// the working directory that holds go.work and README.md.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if isFile(filepath.Join(dir, "go.work")) && isFile(filepath.Join(dir, "README.md")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("readmetest: no directory with go.work and README.md above the working directory")
		}
		dir = parent
	}
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// Blocks returns the blocks marked name, in README order. A marker must be
// followed by a fenced block (blank lines may come between), and every
// fence must be closed: a README edit that breaks either is an error, not
// a block silently left out of the tests.
func Blocks(readme []byte, name string) ([]Block, error) {
	fences, err := Fences(readme, ReadmeMarker)
	if err != nil {
		return nil, err
	}
	var out []Block
	for _, f := range fences {
		if f.Name == name {
			out = append(out, f.Block)
		}
	}
	return out, nil
}

// ReadmeMarker and DocMarker open the marker comments of README.md and of
// the pages under docs/: <!-- readme-test: NAME ... --> and
// <!-- doc-test: NAME ... -->.
const (
	ReadmeMarker = marker
	DocMarker    = "<!-- doc-test:"
)

// Fence is one fenced code block of a page, marked or not.
type Fence struct {
	Block
	// Args are the marker's words after its name; nil when unmarked.
	Args []string
}

// Fences returns every fenced code block of page, in order, with the
// marker (opened by markerPrefix) that precedes it, if any. A fence may be
// indented (a block inside a list item): its marker then carries the same
// indentation, and the block's lines lose it. The rules of Blocks apply: a
// marker not followed by a block, or a fence never closed, is an error.
func Fences(page []byte, markerPrefix string) ([]Fence, error) {
	var (
		out     []Fence
		pending *Fence // a marker waiting for its block
		cur     *Fence
		indent  string // the open fence's indentation
		lineNo  int
	)
	sc := bufio.NewScanner(bytes.NewReader(page))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " \t")
		switch {
		case cur != nil:
			if strings.TrimSpace(line) == "```" {
				out = append(out, *cur)
				cur = nil
				continue
			}
			cur.Text += strings.TrimPrefix(line, indent) + "\n"
		case strings.HasPrefix(trimmed, "```"):
			indent = line[:len(line)-len(trimmed)]
			cur = &Fence{Block: Block{Lang: strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), Line: lineNo}}
			if pending != nil {
				cur.Name, cur.Args = pending.Name, pending.Args
				pending = nil
			}
		case strings.HasPrefix(trimmed, markerPrefix):
			if pending != nil {
				return nil, fmt.Errorf("readmetest: line %d: marker %q has no code block before the next marker", lineNo, pending.Name)
			}
			rest := strings.TrimSpace(strings.TrimPrefix(trimmed, markerPrefix))
			fields := strings.Fields(strings.TrimSuffix(rest, "-->"))
			if len(fields) == 0 || !strings.HasSuffix(rest, "-->") {
				return nil, fmt.Errorf("readmetest: line %d: want %s NAME ... --> on one line", lineNo, markerPrefix)
			}
			pending = &Fence{Block: Block{Name: fields[0]}, Args: fields[1:]}
		case pending != nil && strings.TrimSpace(line) != "":
			return nil, fmt.Errorf("readmetest: line %d: marker %q is not followed by a code block", lineNo, pending.Name)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil {
		return nil, fmt.Errorf("readmetest: the code block of line %d is never closed", cur.Line)
	}
	if pending != nil {
		return nil, fmt.Errorf("readmetest: marker %q at the end has no code block", pending.Name)
	}
	return out, nil
}

// Expected returns the "#> " lines of a shell block, without the prefix:
// what the block's commands print, in order.
func Expected(script string) []string {
	var out []string
	for _, line := range strings.Split(script, "\n") {
		if rest, ok := strings.CutPrefix(line, "#>"); ok {
			out = append(out, strings.TrimPrefix(rest, " "))
		}
	}
	return out
}

// Lines splits output into lines without their trailing spaces; a final
// newline adds no empty line.
func Lines(output string) []string {
	output = strings.TrimSuffix(output, "\n")
	if output == "" {
		return nil
	}
	lines := strings.Split(output, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\r")
	}
	return lines
}

// Match reports whether got has as many lines as want and each matches its
// pattern, where "…" in a pattern matches any text (also none). The error
// names the first line that differs.
func Match(want, got []string) error {
	for i := range max(len(want), len(got)) {
		switch {
		case i >= len(got):
			return fmt.Errorf("line %d: want %q, the output ended (%d lines, want %d)", i+1, want[i], len(got), len(want))
		case i >= len(want):
			return fmt.Errorf("line %d: unexpected %q (%d lines, want %d)", i+1, got[i], len(got), len(want))
		case !pattern(want[i]).MatchString(got[i]):
			return fmt.Errorf("line %d:\n want %s\n  got %s", i+1, want[i], got[i])
		}
	}
	return nil
}

func pattern(want string) *regexp.Regexp {
	parts := strings.Split(strings.TrimRight(want, " \t"), "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
}

// WithoutRedisVars returns env without the variables that name a Redis
// (REDIS_URL and its older names), so a program a test starts talks only
// to the Redis the test gives it.
func WithoutRedisVars(env []string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "REDIS_URL", "REDIS_ADDR", "RMQ_REDIS", "RMQ_CLUSTER", "RMQD_REDIS_URL":
			continue
		}
		out = append(out, kv)
	}
	return out
}
