package producer

import (
	"errors"
	"fmt"
	"time"
)

// MaxUniqueFor is the longest window of WithUniqueFor.
const MaxUniqueFor = 30 * 24 * time.Hour

var (
	// ErrDuplicate is returned for a send with WithUniqueFor whose id a
	// unique send to the same topic slot claimed within its window: the
	// send was refused and wrote nothing.
	ErrDuplicate = errors.New("rmq: duplicate send refused")
	// ErrInvalidUniqueFor is returned for a WithUniqueFor window outside
	// 1ms..MaxUniqueFor.
	ErrInvalidUniqueFor = errors.New("rmq: invalid unique window")
)

// WithUniqueFor makes the send unique for d (1ms..MaxUniqueFor): it is
// refused with ErrDuplicate, writing nothing, when a send of the same id
// to the topic made with WithUniqueFor was accepted less than that send's
// window ago, whatever became of that message since (waiting, in flight,
// acked, dead or removed). An accepted unique send claims its id for d
// from then on, on Redis's clock. A send without the option neither checks
// nor claims, and costs nothing more.
//
// The check and the claim happen in the script call that stores the
// message, so two concurrent unique sends of one id never both go, and a
// call that go-redis sends again after a lost reply recognises its own
// claim (the caller sees success). The claim lives in the id's slot (the
// one WithKey, WithSlotBasis or WithGroup picks), as merging does: a send
// of the id to another slot is not compared with it.
//
// On a range-merge topic a repeat within the window is refused instead of
// merged: the caller asked to know. In a batch each message is refused or
// accepted on its own, and a second message of one id in the batch is a
// duplicate of the first.
func WithUniqueFor(d time.Duration) SendOption {
	return func(c *sendConfig) { c.unique, c.hasUnique = d, true }
}

// uniqueMs checks a WithUniqueFor window and returns it in ms, rounded up
// so the window never ends before d has passed.
func uniqueMs(d time.Duration) (int64, error) {
	if d < time.Millisecond || d > MaxUniqueFor {
		return 0, fmt.Errorf("%w: %v (want 1ms..%v)", ErrInvalidUniqueFor, d, MaxUniqueFor)
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond), nil
}
