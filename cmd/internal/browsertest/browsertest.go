// Package browsertest starts a headless Chromium for tests of the
// dashboard and rmqd's admin listener (test helpers, not for programs).
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// StepTimeout bounds each Do and Text.
const StepTimeout = 30 * time.Second

// New starts a headless Chromium for the test, closed at its end, with
// extra allocator options (flags) after the defaults. It skips the test
// when Chromium is not installed, except in CI (CI=true), where
// scripts/test.sh installs it and its absence is a failure.
func New(t *testing.T, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium not installed (apt-get install -y chromium): %v", err)
		}
		t.Skip("chromium not installed (apt-get install -y chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))
	opts = append(opts, extra...)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first run starts the browser; it must not carry a timeout (that
	// would stop the browser with it), so later steps get their own.
	require.NoError(t, chromedp.Do(ctx))
	return ctx
}

// Do runs browser steps with a timeout.
func Do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, StepTimeout)
	defer cancel()
	require.NoError(t, chromedp.Do(sctx, steps...))
}

// Text returns the text of the first element sel matches.
func Text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, StepTimeout)
	defer cancel()
	s, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(t, err, sel)
	return s
}
