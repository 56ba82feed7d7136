package consumer

import (
	"context"
	"sync"
)

// ackMux: acks of every topic of the client (pushed deliveries, pulled
// ones, acks by id) group-committed into shared script calls (issue 15).
// Stub: every engine still acks through its own group.
type ackMux struct {
	h *hub
}

func newAckMux(h *hub) *ackMux { return &ackMux{h: h} }

func (m *ackMux) start(ctx context.Context, wg *sync.WaitGroup) {}
