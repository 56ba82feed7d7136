package engine

import (
	"log/slog"

	"github.com/rmq-go/rmq/internal/keyspace"
)

// holdEngine is c as the client's holder (hold.Holder) sees it: the
// messages lookahead fetched ahead of their instant are held there
// (holdAll) and handed back to c (awaitHandOver). One pointer: the holder
// counts by it, and it goes into the interface without an allocation.
type holdEngine struct{ c *Engine }

func (e holdEngine) Paused() bool                { return e.c.paused.Load() }
func (e holdEngine) Keys(slot int) keyspace.Keys { return e.c.keys[slot] }
func (e holdEngine) WakeCmd() string             { return e.c.wakeCmd }
func (e holdEngine) Log() *slog.Logger           { return e.c.log }
func (e holdEngine) Unhold(n int)                { e.c.unhold(n) }

// Events is the topic's event log in slot under the settings in force.
func (e holdEngine) Events(slot int) (string, int64) {
	if n := e.c.ops.Life.Current().Events; n > 0 {
		return e.c.ops.Life.Keys(slot)[2], int64(n)
	}
	return "", 0
}

// unhold frees the capacity of n held messages that will not be delivered
// here.
func (c *Engine) unhold(n int) {
	if n == 0 {
		return
	}
	c.mu.Lock()
	c.busy -= n
	c.held -= n
	c.mu.Unlock()
	c.wakeFetcher()
}
