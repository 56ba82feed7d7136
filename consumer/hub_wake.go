package consumer

import (
	"context"
	"sync"
)

// wakeHub: the client's one subscription to the wake channels of every
// topic (issue 15). Stub: every engine still subscribes on its own.
type wakeHub struct {
	h *hub
}

func newWakeHub(h *hub) *wakeHub { return &wakeHub{h: h} }

// start runs the hub's subscription until ctx ends; startCtx bounds the
// start-up calls.
func (w *wakeHub) start(startCtx, ctx context.Context, wg *sync.WaitGroup) error { return nil }
