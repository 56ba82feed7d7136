package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/readmetest"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

// The scrape docs/observability.md shows is the example's: each of its
// lines is a line of the example's scrape ("…" standing for what differs
// between runs, the lateness sum).
func TestDocsScrape(t *testing.T) {
	root, err := readmetest.Root()
	require.NoError(t, err)
	page, err := os.ReadFile(filepath.Join(root, "docs", "observability.md"))
	require.NoError(t, err)
	fences, err := readmetest.Fences(page, readmetest.DocMarker)
	require.NoError(t, err)
	var shown []string
	for _, f := range fences {
		if f.Name == "prometheus-scrape" {
			shown = append(shown, readmetest.Lines(f.Text)...)
		}
	}
	require.NotEmpty(t, shown, "docs/observability.md's block marked prometheus-scrape")

	rdb := redistest.Client(t, redistest.Shared(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, rdb, redistest.Prefix(t), &out, options{}))
	got := readmetest.Lines(out.String())
	for _, want := range shown {
		found := false
		for _, line := range got {
			if readmetest.Match([]string{want}, []string{line}) == nil {
				found = true
				break
			}
		}
		require.True(t, found, "docs/observability.md shows %q; the scrape:\n%s", want, &out)
	}
}
