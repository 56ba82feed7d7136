package lifecycle

import (
	"context"
	"runtime/pprof"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPhase(t *testing.T) {
	var p Phase
	if p != New {
		t.Fatalf("zero Phase is %d, want New", p)
	}
	if was := p.Start(); was != New || p != Started {
		t.Fatalf("first Start: was %d, phase %d", was, p)
	}
	if was := p.Start(); was != Started || p != Started {
		t.Fatalf("second Start: was %d, phase %d", was, p)
	}
	if was := p.Close(); was != Started || p != Closed {
		t.Fatalf("Close: was %d, phase %d", was, p)
	}
	if was := p.Close(); was != Closed {
		t.Fatalf("second Close: was %d", was)
	}
	if was := p.Start(); was != Closed || p != Closed {
		t.Fatalf("Start after Close: was %d, phase %d", was, p)
	}
	var q Phase
	if was := q.Close(); was != New {
		t.Fatalf("Close before Start: was %d", was)
	}
	if was := q.Start(); was != Closed || q != Closed {
		t.Fatalf("Start after an early Close: was %d, phase %d", was, q)
	}
}

func TestGroup(t *testing.T) {
	type key struct{}
	g := NewGroup(context.WithValue(context.Background(), key{}, "v"))
	started := make(chan string, 2)
	ended := make(chan string, 2)
	actor := func(ctx context.Context) {
		label, _ := pprof.Label(ctx, "rmq")
		started <- label + "/" + ctx.Value(key{}).(string)
		<-ctx.Done()
		ended <- label
	}
	g.Go("a", actor)
	g.Go("b", actor)
	got := map[string]bool{<-started: true, <-started: true}
	if !got["a/v"] || !got["b/v"] {
		t.Fatalf("actors started with %v, want labels a and b and the parent's value", got)
	}
	if r := g.Running(); r["a"] != 1 || r["b"] != 1 || len(r) != 2 {
		t.Fatalf("Running = %v", r)
	}
	g.Stop()
	if len(ended) != 2 {
		t.Fatalf("Stop returned with %d of 2 actors ended", len(ended))
	}
	if r := g.Running(); len(r) != 0 {
		t.Fatalf("Running after Stop = %v", r)
	}
	g.Go("late", func(context.Context) { t.Error("an actor started after Stop ran") })
	g.Stop()
}
