package engine

import "github.com/rmq-go/rmq/consumer"

// ownership is the engine's one seam for ZooKeeper mode: which slots it
// consumes, how many deliveries each may have in flight, and the owner
// epoch that fences its script calls. allSlots (this file) is the default:
// competing consumers on every slot, nothing fenced. assignedSlots
// (zkownership.go) consumes the slots a coordinator assigns, one delivery
// at a time, every script call naming the slot's owner epoch. The engine
// asks the seam and never which mode it is in.
type ownership interface {
	// slotFree is how many more deliveries slot may have in flight now.
	slotFree(slot int) int
	// activeSlots lists the slots to sweep.
	activeSlots() []int
	// fetchable keeps the fetch requests of slots owned here now, each
	// with the epoch to name, and returns the others as skipped results.
	fetchable(reqs []fetchReq) (run []fetchReq, skipped []fetchResult)
	// sweepable keeps the slots this engine may sweep, with their epochs.
	sweepable(slotList []int) (owned []int, epochs []int64)
	// epochKey is the owner epoch key a fetch of slot names ("" none).
	epochKey(slot int) string
	// fence adds the epoch key of slot and epoch to a script call's keys
	// and args; args is not written to in place.
	fence(slot int, epoch int64, keys []string, args []any) ([]string, []any)
	// vouched reports whether a delivery may start now.
	vouched() bool
	// mayDispatchLocked reports whether a fetched message may start: the
	// term it was fetched in is still current. The caller holds engine.mu.
	mayDispatchLocked(m *consumer.Message) bool
	// slotIdleLocked is told that the last delivery of slot ended. The
	// caller holds engine.mu.
	slotIdleLocked(slot int)
	// fenced is told that Redis refused a call of slot made with epoch.
	fenced(slot int, epoch int64, op string)
	// rollsBackAbandoned reports whether deliveries that Close abandons are
	// rolled back (an attempt counted) rather than left for shutdown.
	rollsBackAbandoned() bool
	// shutdown runs at Close after the last handler returned.
	shutdown()
	// merges reports whether one script call may name several slots.
	merges() bool
}

// allSlots is the ownership of competing consumers: every slot, always.
type allSlots struct {
	slots    []int
	capacity int // concurrency + prefetch: no per-slot limit
}

func newAllSlots(c *Engine) *allSlots {
	return &allSlots{slots: slotList(c.topic.SlotAmount()), capacity: c.cfg.concurrency + c.cfg.prefetch}
}

func (a *allSlots) slotFree(int) int { return a.capacity }

// activeSlots returns a copy: callers may keep or reorder it.
func (a *allSlots) activeSlots() []int { return append([]int(nil), a.slots...) }

func (a *allSlots) fetchable(reqs []fetchReq) ([]fetchReq, []fetchResult) { return reqs, nil }

func (a *allSlots) sweepable(slotList []int) ([]int, []int64) {
	return slotList, make([]int64, len(slotList))
}

func (a *allSlots) epochKey(int) string { return "" }

func (a *allSlots) fence(_ int, _ int64, keys []string, args []any) ([]string, []any) {
	return keys, args
}

func (a *allSlots) vouched() bool                            { return true }
func (a *allSlots) mayDispatchLocked(*consumer.Message) bool { return true }
func (a *allSlots) slotIdleLocked(int)                       {}
func (a *allSlots) fenced(int, int64, string)                {}
func (a *allSlots) rollsBackAbandoned() bool                 { return true }
func (a *allSlots) shutdown()                                {}
func (a *allSlots) merges() bool                             { return true }

func slotList(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
