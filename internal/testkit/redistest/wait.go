package redistest

import (
	"testing"
	"time"
)

// WaitLong bounds a wait for something that must happen. It is generous:
// test machines are noisy and the race detector is slow, and a wait that
// ends on its signal costs nothing more for being long.
const WaitLong = 15 * time.Second

// pollEvery is how often Poll looks again.
const pollEvery = 10 * time.Millisecond

// Poll calls check until it returns nil, and fails the test with check's
// last error once WaitLong has passed. It is for a state that changes with
// nothing to tell a test that it did (a queue inside Redis that a script
// changed, a metric, a span an exporter collected): where a channel, an
// observer callback or a reply can say so, wait for that instead. check
// runs on the test's goroutine, so it may use require.
func Poll(tb testing.TB, check func() error) {
	tb.Helper()
	PollWithin(tb, WaitLong, check)
}

// PollWithin is Poll with its own bound, for a test whose wait is longer
// than WaitLong by design (a fleet draining thousands of messages).
func PollWithin(tb testing.TB, within time.Duration, check func() error) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("after %v: %v", within, err)
		}
		time.Sleep(pollEvery)
	}
}
