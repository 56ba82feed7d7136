package lifecycle

import (
	"errors"
	"testing"
)

func TestPhase(t *testing.T) {
	var p Phase
	if p != New {
		t.Fatalf("zero Phase is %d, want New", p)
	}
	if err := p.Start(); err != nil || p != Started {
		t.Fatalf("first Start: %v, phase %d", err, p)
	}
	if err := p.Start(); !errors.Is(err, ErrStarted) || p != Started {
		t.Fatalf("second Start: %v, phase %d", err, p)
	}
	if was := p.Close(); was != Started || p != Closed {
		t.Fatalf("Close: was %d, phase %d", was, p)
	}
	if was := p.Close(); was != Closed {
		t.Fatalf("second Close: was %d", was)
	}
	if err := p.Start(); !errors.Is(err, ErrClosed) || p != Closed {
		t.Fatalf("Start after Close: %v, phase %d", err, p)
	}
	var q Phase
	if was := q.Close(); was != New {
		t.Fatalf("Close before Start: was %d", was)
	}
	if err := q.Start(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after an early Close: %v", err)
	}
}
