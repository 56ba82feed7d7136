package engine

import "github.com/rmq-go/rmq/internal/engine/ownership"

// ZooKeeper mode is one seam (package ownership): a coordinator
// (internal/zkcoord) assigns an engine its slots through the engine's
// SlotHandler (Engine.Slots), and the engine asks and tells the
// coordinator through Coordinator.
type (
	SlotHandler = ownership.SlotHandler
	Coordinator = ownership.Coordinator
)

// ownEngine is c as its assigned ownership (ownership.Engine) sees it.
type ownEngine struct{ c *Engine }

func (e ownEngine) Lock()            { e.c.mu.Lock() }
func (e ownEngine) Unlock()          { e.c.mu.Unlock() }
func (e ownEngine) LiveLocked() bool { return e.c.live }
func (e ownEngine) Reset(slot int)   { e.c.waker.reset(slot) }
func (e ownEngine) Poke()            { e.c.waker.Poke() }

func (e ownEngine) RunningLocked() bool {
	return e.c.live && e.c.loops.Context().Err() == nil
}

func (e ownEngine) InFlightLocked(slot int) int { return e.c.perSlot[slot] }

func (e ownEngine) RevokeLocked(set map[int]bool, cause error) {
	for d := range e.c.inflight {
		if set[d.msg.Slot] && !d.revoked && !d.abandoned {
			d.revoked = true
			d.cancel(cause)
		}
	}
}
