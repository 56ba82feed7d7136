package pullwait

import (
	"testing"
	"time"
)

// tokens counts the waiters of ws holding a token, taking them.
func tokens(ws ...*Waiter) int {
	n := 0
	for _, w := range ws {
		select {
		case <-w.C:
			n++
		default:
		}
	}
	return n
}

func TestWakeWakesOneWaiter(t *testing.T) {
	var e Topic
	a, b, c := NewWaiter(), NewWaiter(), NewWaiter()
	for _, w := range []*Waiter{a, b, c} {
		e.Watch(w)
	}
	before := e.Wakes()
	e.Wake()
	if e.Wakes() == before {
		t.Fatal("Wake did not count")
	}
	if n := tokens(a, b, c); n != 1 {
		t.Fatalf("Wake woke %d waiters, want 1", n)
	}
	e.WakeAll()
	if n := tokens(a, b, c); n != 3 {
		t.Fatalf("WakeAll woke %d waiters, want 3", n)
	}
}

func TestClaimKeepsTheEarliestDueTime(t *testing.T) {
	var e Topic
	a, b := NewWaiter(), NewWaiter()
	now := time.Now()
	if !e.Claim(a, now, time.Second) {
		t.Fatal("first claim refused")
	}
	if e.Claim(b, now, 2*time.Second) {
		t.Fatal("a later due time took the ownership")
	}
	if !e.Claim(b, now, time.Millisecond) {
		t.Fatal("an earlier due time did not take the ownership")
	}
	if e.Claim(b, now, -1) {
		t.Fatal("a negative wait claimed")
	}
	if !e.Claim(a, now, time.Hour) {
		t.Fatal("given up ownership was not free")
	}
}

func TestLeaveHandsOver(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		name  string
		h     Handoff
		owned bool
		want  int
	}{
		{"none", HandNone, false, 0},
		{"none, owner", HandNone, true, 1},
		{"next", HandNext, false, 1},
		{"two", HandTwo, false, 2},
		{"all", HandAll, false, 3},
	} {
		var e Topic
		leaving, others := NewWaiter(), []*Waiter{NewWaiter(), NewWaiter(), NewWaiter()}
		e.Watch(leaving)
		for _, w := range others {
			e.Watch(w)
		}
		if c.owned {
			e.Claim(leaving, now, time.Second)
		}
		e.Leave(leaving, c.h, now.Add(time.Second))
		if n := tokens(others...); n != c.want {
			t.Errorf("%s: woke %d, want %d", c.name, n, c.want)
		}
		if n := tokens(leaving); n != 0 {
			t.Errorf("%s: the leaving waiter got a token", c.name)
		}
	}
}
