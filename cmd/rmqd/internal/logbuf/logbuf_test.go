package logbuf

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Buffered log lines come out in order, within about bufferedLogDelay,
// at once when the buffer fills, and on Close.
func TestBufferedLog(t *testing.T) {
	out := &syncBuffer{}
	b := New(out)
	start := time.Now()
	_, _ = b.Write([]byte("one\n"))
	_, _ = b.Write([]byte("two\n"))
	require.Empty(t, out.String(), "gathered, not written yet")
	require.Eventually(t, func() bool { return out.String() == "one\ntwo\n" }, 5*time.Second, 5*time.Millisecond)
	require.GreaterOrEqual(t, time.Since(start), BufferedLogDelay)

	// A full buffer goes out at once.
	line := strings.Repeat("x", 1023) + "\n"
	for range BufferedLogSize / len(line) {
		_, _ = b.Write([]byte(line))
	}
	require.Equal(t, len("one\ntwo\n")+BufferedLogSize, len(out.String()))

	_, _ = b.Write([]byte("three\n"))
	require.NoError(t, b.Close())
	require.True(t, strings.HasSuffix(out.String(), line+"three\n"))
	_, _ = b.Write([]byte("four\n"))
	require.True(t, strings.HasSuffix(out.String(), "three\nfour\n"), "after Close lines go out at once")
}

// syncBuffer collects what the log writes, for assertions.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
