package dashboard_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/readmetest"
)

// docs/dashboard.md describes every route the dashboard serves: each page
// by its path, relative to the mount, as its links name it (`topic?name=…`,
// `./` for the overview), and the one route that changes something, POST
// action, as the **Actions** every page's buttons lead to. The routes are
// read from the handler's source, so a page added there and not to the
// docs fails here.
func TestDocsDescribeEveryRoute(t *testing.T) {
	src, err := os.ReadFile("dashboard.go")
	require.NoError(t, err)
	routes := regexp.MustCompile(`m\.Handle(?:Func)?\("(\w+) (/[^"]*)"`).FindAllStringSubmatch(string(src), -1)
	require.GreaterOrEqual(t, len(routes), 8, "routes found in dashboard.go")
	root, err := readmetest.Root()
	require.NoError(t, err)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "dashboard.md"))
	require.NoError(t, err)
	page := string(doc)
	for _, r := range routes {
		method, path := r[1], r[2]
		if method != "GET" {
			assert.Equal(t, "POST /action", method+" "+path, "a route that changes something other than the actions'")
			assert.Contains(t, page, "- **Actions**", "docs/dashboard.md describes the actions")
			continue
		}
		name := strings.TrimPrefix(path, "/")
		if name == "{$}" {
			name = "./"
		}
		named := "`" + regexp.QuoteMeta(name) + "[`?]" // the page, maybe with its query
		if strings.HasSuffix(name, "/") {
			named = "`" + regexp.QuoteMeta(name) // a directory: a file of it
		}
		assert.True(t, regexp.MustCompile(named).MatchString(page), "docs/dashboard.md names the page %s %s", method, path)
	}
}
