package consumer

import (
	"context"
	"errors"

	"github.com/rmq-go/rmq/internal/options"
)

// ChildResult is the outcome of one child of a flow's parent
// (producer.SendFlow).
type ChildResult struct {
	Topic, ID string
	// State is how the child finished: completed, dead, cancelled or
	// removed (an expired child counts as removed).
	State string
	// Result is what the child's handler set (SetResult) when it
	// completed.
	Result []byte
	// Error is the child's last error when it went dead.
	Error string
}

// ErrNotHandlerContext is returned by Children for a context that is not a
// handler's (or derived from one).
var ErrNotHandlerContext = errors.New("rmq: not a handler's context")

// Children returns the children of this message, a flow's parent, in the
// order they finished; nil for a message that is no parent (or whose
// record lapsed). ctx must be the handler's context (or one derived from
// it): the reader travels in it.
func (m *Message) Children(ctx context.Context) ([]ChildResult, error) {
	f := options.ChildrenFrom(ctx)
	if f == nil {
		return nil, ErrNotHandlerContext
	}
	cs, err := f(ctx, m.Topic, m.Slot, m.ID)
	if err != nil || len(cs) == 0 {
		return nil, err
	}
	out := make([]ChildResult, len(cs))
	for i, c := range cs {
		out[i] = ChildResult{Topic: c.Topic, ID: c.ID, State: c.State, Result: c.Result, Error: c.Error}
	}
	return out, nil
}
