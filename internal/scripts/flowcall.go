package scripts

import (
	"fmt"
	"strconv"
)

// GSendGroup is one slot's part of a gsend.lua call: messages of one
// topic slot that carry a group (their options block names it).
type GSendGroup struct {
	Store, Prepare, Msg, Wake, Delayed string
	Queue, Turn                        string // the slot's group keys
	Type                               int    // 1 range-merge, 2 priority, 3 fixed-time
	Msgs                               []GSendMsg
}

// GSendMsg is one message of a GSendGroup.
type GSendMsg struct {
	ID    string
	Score string // due ms, priority, or the range in ms for range-merge
	Nonce string
	Opts  []byte // options block: names the group
	Body  []byte
}

// GSendArgs returns the KEYS and ARGV of one gsend.lua call; several
// groups only on a single node.
func GSendArgs(wakeCmd string, groups []GSendGroup) ([]string, []any) {
	n := 0
	for _, g := range groups {
		n += len(g.Msgs)
	}
	keys := make([]string, 0, 7*len(groups))
	args := make([]any, 0, 1+2*len(groups)+5*n)
	args = append(args, wakeCmd)
	for _, g := range groups {
		keys = append(keys, g.Store, g.Prepare, g.Msg, g.Wake, g.Delayed, g.Queue, g.Turn)
		args = append(args, g.Type, len(g.Msgs))
	}
	for _, g := range groups {
		for _, m := range g.Msgs {
			args = append(args, m.ID, m.Score, m.Nonce, m.Opts, m.Body)
		}
	}
	return keys, args
}

// PermitCall is one permit.lua call: a client's permits of a topic's
// limits on a cluster.
type PermitCall struct {
	Flow, Holders, Permits string // slots.FlowKeys
	Client                 string
	Want, Give, Refund     int
	LeaseMs                int64
	RateIv, RateTol        float64 // µs; 0: no rate
	Concurrency            int     // 0: none
}

// Args returns the call's KEYS and ARGV.
func (p PermitCall) Args() ([]string, []any) {
	num := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	return []string{p.Flow, p.Holders, p.Permits},
		[]any{p.Client, p.Want, p.Give, p.Refund, p.LeaseMs, num(p.RateIv), num(p.RateTol), p.Concurrency}
}

// PermitReply is permit.lua's answer.
type PermitReply struct {
	Granted int
	// Wait is 0, the Redis ms from which the rate allows the next start,
	// or -1: no place was free.
	Wait int64
	// Woke: places came free while a client waited for one.
	Woke bool
	// Expiry, with Wait -1: the Redis ms at which the first lease of the
	// places held runs out (a killed client's places free then).
	Expiry int64
	// NowMs is Redis's clock where the permits live (Flow.PermitUntil
	// counts from it).
	NowMs int64
}

// ParsePermitReply reads permit.lua's reply.
func ParsePermitReply(vals []any) (PermitReply, error) {
	if len(vals) != 5 {
		return PermitReply{}, fmt.Errorf("rmq: permit: unexpected reply of %d values", len(vals))
	}
	return PermitReply{Granted: int(toInt(vals[0])), Wait: toInt(vals[1]), Woke: toInt(vals[2]) == 1, Expiry: toInt(vals[3]), NowMs: toInt(vals[4])}, nil
}

// GroupMember is a waiting grouped message's member of its slot's gq
// (flowlib.lua's gmember): "group\0KEY\0id", KEY the 16-digit due ms
// (time-based types) or 2^53 - priority.
func GroupMember(group string, timeBased bool, orig float64, id string) string {
	key := int64(orig)
	if !timeBased {
		key = 1<<53 - key
	}
	return fmt.Sprintf("%s\x00%016d\x00%s", group, key, id)
}
