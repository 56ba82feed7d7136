// Package flowtree is the Go side of flows (producer.SendFlow): parents
// that run once all their children finished. It stages and activates a
// flow's nodes, reports a child's final outcome to its parent's record
// (luascripts/flowrec.lua), finds the outcomes nobody reported
// (flowcheck.lua) and reads records. docs/design.md ("Flows") states the
// invariant and where each step records itself.
package flowtree

import (
	"strconv"
	"strings"
)

// Header is the header a flow child carries: its parent's Ref. It rides
// the message's options, so the process that ends a delivery knows, from
// the message it already holds, where to report the outcome.
const Header = "rmq-flow-parent"

// Ref names a child's place under its parent: the parent's topic, slot
// and id, the child's index among the parent's children, and whether the
// child's failure fails the parent.
type Ref struct {
	Fail  bool
	Slot  int
	Index int
	Topic string
	ID    string
}

// String encodes r: "<F|C><slot> <index> <len(topic)>:<topic><id>".
func (r Ref) String() string {
	f := "C"
	if r.Fail {
		f = "F"
	}
	return f + strconv.Itoa(r.Slot) + " " + strconv.Itoa(r.Index) + " " + strconv.Itoa(len(r.Topic)) + ":" + r.Topic + r.ID
}

// ParseRef decodes String's form; ok is false for anything else.
func ParseRef(s string) (r Ref, ok bool) {
	if len(s) < 2 || (s[0] != 'F' && s[0] != 'C') {
		return Ref{}, false
	}
	r.Fail = s[0] == 'F'
	slot, rest, ok1 := strings.Cut(s[1:], " ")
	idx, rest, ok2 := strings.Cut(rest, " ")
	tl, rest, ok3 := strings.Cut(rest, ":")
	if !ok1 || !ok2 || !ok3 {
		return Ref{}, false
	}
	var err1, err2, err3 error
	r.Slot, err1 = strconv.Atoi(slot)
	r.Index, err2 = strconv.Atoi(idx)
	n, err3 := strconv.Atoi(tl)
	if err1 != nil || err2 != nil || err3 != nil || n < 0 || n > len(rest) {
		return Ref{}, false
	}
	r.Topic, r.ID = rest[:n], rest[n:]
	return r, true
}

// RefOf returns the parent Ref a message's headers carry.
func RefOf(headers map[string]string) (Ref, bool) {
	v, ok := headers[Header]
	if !ok {
		return Ref{}, false
	}
	return ParseRef(v)
}

// The states of a finished child (consumer.ChildResult.State).
const (
	Completed = "completed"
	Dead      = "dead"
	Cancelled = "cancelled"
	Removed   = "removed"
)

// stateOf is the name of a state letter of flowrec.lua.
func stateOf(c byte) string {
	switch c {
	case 'c':
		return Completed
	case 'd':
		return Dead
	case 'x':
		return Cancelled
	}
	return Removed
}
