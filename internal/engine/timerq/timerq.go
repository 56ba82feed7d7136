// Package timerq is the min-heap of timed entries the leaseHub keeps its
// schedules in: engines ordered by the time their next check or extension
// is due.
package timerq

import (
	"container/heap"
	"time"
)

// Timed is one entry's place in a Queue; V is what it stands for.
type Timed[V any] struct {
	At  time.Time
	idx int // in the queue's heap; -1 when not queued
	V   V
}

// Init makes t an unqueued entry for v.
func (t *Timed[V]) Init(v V) {
	t.idx = -1
	t.V = v
}

// Queued reports whether t is in a queue.
func (t *Timed[V]) Queued() bool { return t.idx >= 0 }

// Queue is a min-heap of Timed by At.
type Queue[V any] struct{ h timedHeap[V] }

// Set queues t at at (or moves it) and reports whether it is now first.
func (q *Queue[V]) Set(t *Timed[V], at time.Time) bool {
	t.At = at
	if t.idx >= 0 {
		heap.Fix(&q.h, t.idx)
	} else {
		heap.Push(&q.h, t)
	}
	return t.idx == 0
}

// Remove takes t out of the queue if it is in it.
func (q *Queue[V]) Remove(t *Timed[V]) {
	if t.idx >= 0 {
		heap.Remove(&q.h, t.idx)
	}
}

// Peek returns the first entry, or nil.
func (q *Queue[V]) Peek() *Timed[V] {
	if len(q.h) == 0 {
		return nil
	}
	return q.h[0]
}

// Pop removes the first entry.
func (q *Queue[V]) Pop() { heap.Pop(&q.h) }

type timedHeap[V any] []*Timed[V]

func (h timedHeap[V]) Len() int           { return len(h) }
func (h timedHeap[V]) Less(i, j int) bool { return h[i].At.Before(h[j].At) }
func (h timedHeap[V]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *timedHeap[V]) Push(x any) {
	t := x.(*Timed[V])
	t.idx = len(*h)
	*h = append(*h, t)
}
func (h *timedHeap[V]) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.idx = -1
	return t
}
