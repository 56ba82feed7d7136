package rmq

import (
	"sync"
	"time"

	"github.com/rmq-go/rmq/internal/engine"
	"github.com/rmq-go/rmq/internal/pullwait"
	"github.com/rmq-go/rmq/topic"
)

// pullState holds the client's pull engines, one per pulled topic, made on
// the first Pull of the topic and closed by Close. Each subscribes to its
// topic's wake-ups and sweeps the leases pullers let run out, so topics
// that are only pulled are swept. byTopic and starting are guarded by the
// client's mu; an engine starts outside it (its start makes network calls).
// Waiting Pulls are woken per topic, and as few as the messages need
// (internal/pullwait).
type pullState struct {
	byTopic map[string]*pullEntry
	// starting counts engine starts under way, and closes by
	// ReleaseIdlePulls (pull_release.go): Close waits for them.
	starting sync.WaitGroup
	// count counts the waits that a wake-up ended and fetches the engine
	// Pulls made; tests read them.
	count pullwait.Counters
}

// pullEntry is one topic's engine: ready is closed once its start ended,
// with p set, or err set and the entry removed (a later Pull tries again).
type pullEntry struct {
	topic topic.Topic
	ready chan struct{}
	p     *engine.Engine
	err   error

	// users counts the Pulls (and NackByID calls) holding the entry, used
	// is when the last one let go, leasedUntil when the last lease it
	// handed out runs out: what ReleaseIdlePulls looks at. Guarded by the
	// client's mu.
	users       int
	used        time.Time
	leasedUntil time.Time

	pullwait.Topic // the Pulls waiting on this topic
}

// closeLocked is Close's part, under the client's mu after the phase moved
// to Closed: it wakes every waiting Pull (which then sees the phase) and
// returns the started engines to close; an engine whose start is under way
// is closed by its starter, and Close waits for that through starting.
func (p *pullState) closeLocked() []*engine.Engine {
	out := make([]*engine.Engine, 0, len(p.byTopic))
	for _, e := range p.byTopic {
		e.WakeAll()
		if e.p != nil {
			out = append(out, e.p)
		}
	}
	return out
}
