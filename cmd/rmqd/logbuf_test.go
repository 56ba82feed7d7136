package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/logbuf"
)

// Buffered log lines come out in order, within about bufferedLogDelay,
// at once when the buffer fills, and on Close.
func TestBufferedLog(t *testing.T) {
	out := &syncBuffer{}
	b := logbuf.NewBufferedLog(out)
	start := time.Now()
	_, _ = b.Write([]byte("one\n"))
	_, _ = b.Write([]byte("two\n"))
	require.Empty(t, out.String(), "gathered, not written yet")
	require.Eventually(t, func() bool { return out.String() == "one\ntwo\n" }, 5*time.Second, 5*time.Millisecond)
	require.GreaterOrEqual(t, time.Since(start), logbuf.BufferedLogDelay)

	// A full buffer goes out at once.
	line := strings.Repeat("x", 1023) + "\n"
	for range logbuf.BufferedLogSize / len(line) {
		_, _ = b.Write([]byte(line))
	}
	require.Equal(t, len("one\ntwo\n")+logbuf.BufferedLogSize, len(out.String()))

	_, _ = b.Write([]byte("three\n"))
	require.NoError(t, b.Close())
	require.True(t, strings.HasSuffix(out.String(), line+"three\n"))
	_, _ = b.Write([]byte("four\n"))
	require.True(t, strings.HasSuffix(out.String(), "three\nfour\n"), "after Close lines go out at once")
}
