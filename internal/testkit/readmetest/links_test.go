package readmetest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every relative link of README.md, CHANGELOG.md and docs/*.md names a file that exists
// and, after a #, a heading of it: pages moved to docs/ keep their links.
func TestReadmeLinks(t *testing.T) {
	root, err := Root()
	require.NoError(t, err)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	pages = append(pages, filepath.Join(root, "README.md"), filepath.Join(root, "CHANGELOG.md"), filepath.Join(root, "cmd", "rmqd", "README.md"))
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	checked := 0
	for _, page := range pages {
		text, err := os.ReadFile(page)
		require.NoError(t, err)
		for _, m := range link.FindAllStringSubmatch(string(withoutCode(string(text))), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			rel, _ := filepath.Rel(root, page)
			fi, err := os.Stat(path)
			if !assert.NoError(t, err, "%s: link %s", rel, target) {
				continue
			}
			checked++
			if anchor == "" || fi.IsDir() {
				continue
			}
			linked, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Contains(t, anchors(string(linked)), anchor, "%s: link %s", rel, target)
		}
	}
	require.Greater(t, checked, 20, "links checked")
}

// withoutCode blanks fenced code blocks, whose text is not markdown.
func withoutCode(s string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.SplitAfter(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			in = !in
			continue
		}
		if !in {
			b.WriteString(line)
		}
	}
	return b.String()
}

// anchors returns the ids GitHub gives a page's headings: lower case,
// punctuation dropped but for - and _, spaces as -.
func anchors(page string) []string {
	var out []string
	for _, line := range strings.Split(withoutCode(page), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}
