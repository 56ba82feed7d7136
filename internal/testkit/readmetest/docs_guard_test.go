package readmetest

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docKinds are the markers of docs/*.md, <!-- doc-test: KIND ... -->, and
// the test that runs the blocks of each.
var docKinds = map[string]string{
	"go":                "internal/testkit/readmetest TestDocsGoBlocks: compiled in a wrapper, in a user's module; most also run against a real redis-server (and ZooKeeper)",
	"rmqd":              "cmd/rmqd TestDocsRmqdSessions: run as a shell session against rmqd --dev, output as the #> lines say",
	"rmqd-flags":        "cmd/rmqd TestDocsRmqdCommands: each command's flags parsed by rmqd, and the servable ones started against a real redis-server",
	"rmqctl":            "cmd/rmqctl TestDocsRmqctlSession: built as written, and the $ session run against a real redis-server holding its messages",
	"rmqctl-connect":    "cmd/rmqctl TestDocsRmqctlConnectForms: each line run with its placeholders filled in by real servers (ACL user, TLS, cluster)",
	"prometheus-scrape": "x/prometheus/example TestDocsScrape: the example's scrape holds each line",
	"keys":              "slots TestDocsKeyLayout: the keys shown are keyspace.KeysFor's",
	"bench":             "bench TestDocsBenchCommands: each command's flags parsed by the benchmark",
	"skip":              "none: the marker says why, in parentheses",
}

// Every code block of docs/*.md and cmd/rmqd/README.md is either plain text (```text) or marked
// with the test that runs it: a page cannot show a command, a curl call or
// Go code that no test runs. A fence without a language is refused, so an
// output block says it is text.
func TestDocsBlocksAreMarked(t *testing.T) {
	root, err := Root()
	require.NoError(t, err)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, pages)
	// rmqd's own page is a docs page too: the reference's security and
	// forwarding parts.
	pages = append(pages, filepath.Join(root, "cmd", "rmqd", "README.md"))
	counts := map[string]int{}
	for _, page := range pages {
		text, err := os.ReadFile(page)
		require.NoError(t, err)
		fences, err := Fences(text, DocMarker)
		require.NoError(t, err, "%s", page)
		for _, f := range fences {
			rel, _ := filepath.Rel(root, page)
			at := rel + ":" + strconv.Itoa(f.Line)
			if f.Name == "" {
				assert.Equal(t, "text", f.Lang, "%s: an unmarked block must be ```text; code needs <!-- doc-test: KIND --> (%s)", at, strings.Join(kinds(), ", "))
				continue
			}
			counts[f.Name]++
			_, ok := docKinds[f.Name]
			assert.True(t, ok, "%s: unknown marker %q (%s)", at, f.Name, strings.Join(kinds(), ", "))
			assert.NotEqual(t, "", f.Lang, "%s: a fence names its language", at)
			if f.Name == "skip" {
				reason := strings.Join(f.Args, " ")
				assert.True(t, strings.HasPrefix(reason, "(") && strings.HasSuffix(reason, ")") && len(reason) > 10,
					"%s: <!-- doc-test: skip (why no test runs it) -->", at)
			}
		}
	}
	for kind := range docKinds {
		assert.Positive(t, counts[kind], "no block is marked %s: drop it from docKinds", kind)
	}
	t.Logf("marked blocks by kind: %v", counts)
}

func kinds() []string {
	var out []string
	for k := range docKinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestFences(t *testing.T) {
	page := "<!-- doc-test: go a -->\n```go\nx := 1\n```\n\n```text\nout\n```\n\n- item:\n\n  <!-- doc-test: go b -->\n  ```go\n  y := 2\n  ```\n"
	got, err := Fences([]byte(page), DocMarker)
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, Fence{Block: Block{Name: "go", Lang: "go", Text: "x := 1\n", Line: 2}, Args: []string{"a"}}, got[0])
	assert.Equal(t, Fence{Block: Block{Lang: "text", Text: "out\n", Line: 6}}, got[1])
	assert.Equal(t, Fence{Block: Block{Name: "go", Lang: "go", Text: "y := 2\n", Line: 13}, Args: []string{"b"}}, got[2])
	// The README's marker is not the docs' one.
	got, err = Fences([]byte(page), ReadmeMarker)
	require.NoError(t, err)
	assert.Empty(t, got[0].Name)
}
