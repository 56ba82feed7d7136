package fetcher

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// withGrace's context outlives its parent by the grace, and ends at once
// when stopped.
func TestWithGrace(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	gctx, stop := withGrace(parent, time.Hour)
	cancel()
	require.NoError(t, gctx.Err(), "within the grace")
	stop()
	require.ErrorIs(t, gctx.Err(), context.Canceled)

	parent, cancel = context.WithCancel(context.Background())
	gctx, stop = withGrace(parent, time.Millisecond)
	defer stop()
	cancel()
	select {
	case <-gctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the grace did not end")
	}
}
