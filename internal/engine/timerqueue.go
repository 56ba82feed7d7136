package engine

import (
	"container/heap"
	"time"
)

// The leaseHub's schedules (hub_leases.go): engines ordered by the time
// their next check or extension is due.

// timed is an engine's place in a timerQueue.
type timed struct {
	at  time.Time
	idx int // in the queue's heap; -1 when not queued
	st  *leaseState
}

// timerQueue is a min-heap of timed by at.
type timerQueue struct{ h timedHeap }

// set queues t at at (or moves it) and reports whether it is now first.
func (q *timerQueue) set(t *timed, at time.Time) bool {
	t.at = at
	if t.idx >= 0 {
		heap.Fix(&q.h, t.idx)
	} else {
		heap.Push(&q.h, t)
	}
	return t.idx == 0
}

func (q *timerQueue) remove(t *timed) {
	if t.idx >= 0 {
		heap.Remove(&q.h, t.idx)
	}
}

func (q *timerQueue) peek() *timed {
	if len(q.h) == 0 {
		return nil
	}
	return q.h[0]
}

func (q *timerQueue) pop() { heap.Pop(&q.h) }

type timedHeap []*timed

func (h timedHeap) Len() int           { return len(h) }
func (h timedHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timedHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *timedHeap) Push(x any) {
	t := x.(*timed)
	t.idx = len(*h)
	*h = append(*h, t)
}
func (h *timedHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.idx = -1
	return t
}
