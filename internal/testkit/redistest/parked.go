package redistest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
)

// Parked counts the goroutines that run fn (a full function name, such as
// "github.com/rmq-go/rmq/internal/engine/fetcher.(*Fetcher).Run") and carry every
// pprof label of labels (nil: any), and those of them parked in a select
// statement of fn itself. A goroutine started by pprof.Do carries the
// labels of the context it was started from, so a test that starts a
// library with a labelled context can pick its own goroutines out of a
// binary whose tests run in parallel.
//
// It reads the goroutine profile: each entry lists the stack's program
// counters, the runtime's frames included (runtime.selectgo where a select
// parks), and the labels.
func Parked(fn string, labels map[string]string) (parked, all int) {
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		panic(err) // writing to a bytes.Buffer does not fail
	}
	// "goroutine profile: total N", then one entry per stack and labels,
	// the most common first, separated by blank lines.
	_, body, _ := strings.Cut(b.String(), "\n")
	for _, entry := range strings.Split(body, "\n\n") {
		lines := strings.Split(entry, "\n")
		count, stack, ok := strings.Cut(lines[0], " @ ")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(count)
		if err != nil {
			continue
		}
		var have map[string]string
		if len(lines) > 1 {
			if l, ok := strings.CutPrefix(lines[1], "# labels: "); ok {
				_ = json.Unmarshal([]byte(l), &have)
			}
		}
		if !containsLabels(have, labels) {
			continue
		}
		var pcs []uintptr
		for _, f := range strings.Fields(stack) {
			pc, err := strconv.ParseUint(strings.TrimPrefix(f, "0x"), 16, 64)
			if err == nil {
				pcs = append(pcs, uintptr(pc))
			}
		}
		frames := runtime.CallersFrames(pcs)
		prev := ""
		for {
			fr, more := frames.Next()
			if fr.Function == fn {
				all += n
				if prev == "runtime.selectgo" {
					parked += n
				}
				break
			}
			prev = fr.Function
			if !more {
				break
			}
		}
	}
	return parked, all
}

func containsLabels(have, want map[string]string) bool {
	for k, v := range want {
		if h, ok := have[k]; !ok || h != v {
			return false
		}
	}
	return true
}

// WaitParked waits until n goroutines run fn with labels, every one of
// them parked in a select of fn (see Parked). Going to sleep is an event
// no goroutine announces: the profile is polled.
func WaitParked(tb testing.TB, fn string, labels map[string]string, n int) {
	tb.Helper()
	Poll(tb, func() error {
		if parked, all := Parked(fn, labels); all != n || parked != n {
			return fmt.Errorf("%d goroutines run %s with labels %v, %d of them parked in a select; want %d parked",
				all, fn, labels, parked, n)
		}
		return nil
	})
}
