package logbuf

import (
	"io"
	"sync"
	"time"
)

// bufferedLog gathers log lines and writes them out together: when
// bufferedLogSize bytes gathered, bufferedLogDelay after the first line
// of a batch, and on Close. The access log goes through it: a write per
// request (a system call per line on stderr) was a fifth of rmqd's CPU on
// a busy publish route. Other log lines are written at once.
type bufferedLog struct {
	mu      sync.Mutex
	w       io.Writer
	buf     []byte
	timer   *time.Timer
	pending bool // timer armed for what buf holds
	closed  bool
}

const (
	BufferedLogSize  = 32 << 10
	BufferedLogDelay = 100 * time.Millisecond
)

func New(w io.Writer) *bufferedLog { return &bufferedLog{w: w} }

// Write takes one line (slog writes a record with one call).
func (b *bufferedLog) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return b.w.Write(p)
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) >= BufferedLogSize {
		b.flushLocked()
		return len(p), nil
	}
	if !b.pending {
		b.pending = true
		if b.timer == nil {
			b.timer = time.AfterFunc(BufferedLogDelay, b.flush)
		} else {
			b.timer.Reset(BufferedLogDelay)
		}
	}
	return len(p), nil
}

func (b *bufferedLog) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
}

// flushLocked writes out what gathered; a failed write drops it (there is
// nowhere else to report it).
func (b *bufferedLog) flushLocked() {
	if len(b.buf) > 0 {
		_, _ = b.w.Write(b.buf)
		b.buf = b.buf[:0]
	}
	b.pending = false
}

// Close writes out what gathered; later lines are written at once.
func (b *bufferedLog) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	if b.timer != nil {
		b.timer.Stop()
	}
	b.flushLocked()
	return nil
}
