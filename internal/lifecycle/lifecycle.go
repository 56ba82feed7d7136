// Package lifecycle writes down the one start/stop style of the library's
// background work, and names the states of the objects that own it.
//
// Actors. Every background goroutine belongs to an actor: the consumer
// engine's fetcher, waker, shard waker, sweeper and lease keeper, the
// ZooKeeper coordinator's decision loop and heartbeat. An actor is an
// unexported struct made by newX(...) with one method
//
//	start(ctx context.Context, wg *sync.WaitGroup)
//
// that calls wg.Add(1) and starts the actor's goroutine, which runs until
// ctx is done and calls wg.Done as its last act. An actor has no stop method
// of its own: its owner stops it by cancelling ctx and waiting on wg (the
// style of asynq's start(wg), with the context in place of a done channel).
// Actors that must stop at different times get different contexts and wait
// groups from their owner, and the owner's Close says in which order, and
// why, next to the code that does it.
//
// Owners. An object that starts actors (rmq.Client, the consumer engine, the
// ZooKeeper coordinator) has Start(ctx) and Close, and keeps its Phase under
// its own mutex: Start moves it from New to Started once, Close moves it to
// Closed once; a later Start is refused with ErrStarted or ErrClosed.
package lifecycle

import "errors"

var (
	// ErrStarted is returned by a second Start (and by rmq.Client.Register
	// after Start).
	ErrStarted = errors.New("rmq: client already started")
	// ErrClosed is returned by calls on a closed client.
	ErrClosed = errors.New("rmq: client closed")
	// ErrNotStarted is returned by calls that need a started client
	// (rmq.Client.Pull) before Start.
	ErrNotStarted = errors.New("rmq: client not started")
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

// Start moves p from New to Started; it fails, changing nothing, in any
// other phase. The caller holds the owner's lock.
func (p *Phase) Start() error {
	switch *p {
	case Started:
		return ErrStarted
	case Closed:
		return ErrClosed
	}
	*p = Started
	return nil
}

// Close moves p to Closed and returns the phase it was in. The caller holds
// the owner's lock.
func (p *Phase) Close() (was Phase) {
	was, *p = *p, Closed
	return was
}
