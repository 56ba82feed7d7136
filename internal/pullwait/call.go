package pullwait

import (
	"context"
	"sync/atomic"
	"time"
)

// Source is one topic of a Call: its waiting Pulls and its fetch.
type Source[D any] interface {
	// Waits returns the topic's waiting Pulls.
	Waits() *Topic
	// TimeBased reports whether the topic's messages are timed (a fetch
	// tells the next due time), not priority ones.
	TimeBased() bool
	// Pull takes up to n messages leased for lease, and tells how long
	// until the topic's next due time (-1: none known).
	Pull(ctx context.Context, n int, lease time.Duration) ([]D, time.Duration, error)
}

// Counters are what Calls count, for tests: fetches made and waits that a
// wake-up ended.
type Counters struct{ Fetches, Woken atomic.Int64 }

// Call is one Pull (rmq.Client.Pull): it fetches from its sources in
// order until it has messages or its wait ran out, sleeping in between on
// the sources' wake-ups and due times.
type Call[D any] struct {
	Sources  []Source[D]
	N        int
	Lease    time.Duration
	Deadline time.Time
	// Closed reports that the client closes: Run returns ClosedErr.
	Closed    func() bool
	ClosedErr error
	Count     *Counters

	// w is registered with the sources only once a fetch came back empty,
	// so a Pull that finds messages at once pays nothing for waiting.
	w *Waiter
	// waits are, per source, how long until its next due time by the last
	// fetch (-1: none known, -2: not fetched in the last round).
	waits []time.Duration
}

// Run fetches until there are messages, the deadline passed, or ctx ended.
func (p *Call[D]) Run(ctx context.Context) ([]D, error) {
	p.waits = make([]time.Duration, len(p.Sources))
	var seenBuf [4]uint64
	for {
		// The wake counts read before a fetch tell whether a wake-up came
		// between the fetch and the registration; Close's counts too.
		var seen []uint64
		if p.w == nil {
			seen = seenBuf[:0]
			for _, s := range p.Sources {
				seen = append(seen, s.Waits().Wakes())
			}
		}
		if p.Closed() {
			return nil, p.ClosedErr
		}
		out, err := p.fetch(ctx)
		if err != nil || len(out) > 0 || !time.Now().Before(p.Deadline) {
			return out, err
		}
		if p.w == nil && p.register(seen) {
			continue
		}
		if err := p.sleep(ctx); err != nil {
			return nil, err
		}
	}
}

// fetch takes up to N messages, source by source. When a source's fetch
// fails after earlier ones gave messages, those are returned without the
// error: they are leased already, and callers drop messages that come with
// an error.
func (p *Call[D]) fetch(ctx context.Context) ([]D, error) {
	var out []D
	for i := range p.waits {
		p.waits[i] = -2
	}
	for i, s := range p.Sources {
		p.Count.Fetches.Add(1)
		ds, wait, err := s.Pull(ctx, p.N-len(out), p.Lease)
		if err != nil {
			if len(out) > 0 {
				return out, nil
			}
			return nil, err
		}
		p.waits[i] = wait
		out = append(out, ds...)
		if len(out) == p.N {
			break
		}
	}
	return out, nil
}

// register makes the call a waiter of its sources; it reports whether a
// wake-up came since seen was read (then the call fetches again at once).
func (p *Call[D]) register(seen []uint64) (woke bool) {
	p.w = NewWaiter()
	for i, s := range p.Sources {
		s.Waits().Watch(p.w)
		woke = woke || s.Waits().Wakes() != seen[i]
	}
	return woke
}

// sleep waits until the due times this call owns, a wake-up, or the end of
// its wait.
func (p *Call[D]) sleep(ctx context.Context) error {
	left := time.Until(p.Deadline)
	now := time.Now()
	for i, s := range p.Sources {
		if s.Waits().Claim(p.w, now, p.waits[i]) {
			left = min(left, p.waits[i])
		}
	}
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-p.w.C:
		p.Count.Woken.Add(1)
	case <-t.C:
	}
	return nil
}

// Leave unregisters a call that waited and is done, waking whom the others
// need: took says it returns messages.
func (p *Call[D]) Leave(took bool) {
	w, waits := p.w, p.waits
	if w == nil {
		return
	}
	now := time.Now()
	for i, s := range p.Sources {
		h := HandNone
		if took {
			switch {
			case waits[i] == 0:
				h = HandAll
			case waits[i] != -2 && !s.TimeBased():
				h = HandTwo
			case waits[i] > 0:
				h = HandNext
			}
		}
		s.Waits().Leave(w, h, now.Add(max(waits[i], 0)))
		if waits[i] == -2 {
			// Not fetched in the last round (the earlier sources filled N,
			// or one failed): the wake-up that woke this Pull may have
			// been this source's, so another waiter looks at it.
			s.Waits().Signal(1)
		}
	}
	// A wake-up it received and did not act on goes on to another waiter.
	select {
	case <-w.C:
		for _, s := range p.Sources {
			s.Waits().Signal(1)
		}
	default:
	}
}
