// Package lifecycle writes down the one start/stop style of the library's
// background work, and names the states of the objects that own it.
//
// Actors. Every background goroutine belongs to an actor: a value with a
// method
//
//	run(ctx context.Context)
//
// that works until ctx is done and then returns. An actor never starts
// itself: its owner starts it with Group.Go, which names it (the name is
// also the goroutine's pprof label "rmq", so a goroutine dump or profile
// says which actor a goroutine is), and stops it with Group.Stop, which
// cancels the context and waits until every actor of the group returned.
// Actors that must stop at different times belong to different groups of
// their owner, and the owner's Close says in which order, and why, next to
// the code that does it.
//
// Owners. An object that starts actors (rmq.Client, the consumer engine and
// its hub, the ZooKeeper coordinator) has Start and Close and keeps its
// Phase under its own mutex: Start moves it from New to Started once, Close
// moves it to Closed once.
package lifecycle

import (
	"context"
	"runtime/pprof"
	"sync"
)

// Phase is the state of an owner. The zero value is New.
type Phase uint8

const (
	// New: made, not started.
	New Phase = iota
	// Started: Start ran (and may have failed half way; Close cleans up).
	Started
	// Closed: Close ran, or began.
	Closed
)

// Start moves p from New to Started and returns the phase it was in: a
// Start in any other phase changes nothing (the caller reports Started or
// Closed as its own error). The caller holds the owner's lock.
func (p *Phase) Start() (was Phase) {
	was = *p
	if was == New {
		*p = Started
	}
	return was
}

// Close moves p to Closed and returns the phase it was in. The caller holds
// the owner's lock.
func (p *Phase) Close() (was Phase) {
	was, *p = *p, Closed
	return was
}

// Group runs actors until it is stopped. The zero value is not usable;
// make one with NewGroup.
type Group struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	stopped bool
	running map[string]int // actors running, by name (Running)
}

// NewGroup returns a group whose actors' contexts carry parent's values
// but not its cancellation: only Stop ends them.
func NewGroup(parent context.Context) *Group {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	return &Group{ctx: ctx, cancel: cancel, running: map[string]int{}}
}

// Go starts the actor run under name. After Stop it starts nothing: run is
// not called.
func (g *Group) Go(name string, run func(ctx context.Context)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return
	}
	g.running[name]++
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		defer g.done(name)
		pprof.Do(g.ctx, pprof.Labels("rmq", name), run)
	}()
}

func (g *Group) done(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running[name]--; g.running[name] == 0 {
		delete(g.running, name)
	}
}

// Stop cancels the actors' context and returns once every actor returned.
// It may be called more than once.
func (g *Group) Stop() {
	g.mu.Lock()
	g.stopped = true
	g.mu.Unlock()
	g.cancel()
	g.wg.Wait()
}

// Context is the context the actors run with: done once Stop began.
func (g *Group) Context() context.Context { return g.ctx }

// Running returns how many actors of each name run now.
func (g *Group) Running() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]int, len(g.running))
	for k, v := range g.running {
		out[k] = v
	}
	return out
}
