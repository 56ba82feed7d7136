package consumer

import (
	"context"
	"sync"
)

// callMux: fetches and acks of the client's topics group-committed into
// shared script calls (issue 15). Stub: every engine still calls alone.
type callMux struct {
	h *hub
}

func newCallMux(h *hub) *callMux { return &callMux{h: h} }

func (m *callMux) start(ctx context.Context, wg *sync.WaitGroup) {}
