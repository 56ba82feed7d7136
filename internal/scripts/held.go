package scripts

import "fmt"

// HeldGroup is one slot's deliveries held since a lookahead fetch, for a
// Confirm or Release call (a single node: groups of any topics share one).
type HeldGroup struct {
	Store, Prepare, Msg, Wake string
	// Merges: the topic is range-merge (a repeat merges into the held
	// delivery); otherwise fixed-time (a re-send replaces it).
	Merges bool
	Items  []HeldItem
}

// HeldItem is one held delivery: its id, its delivery token and the store
// score (due ms) the fetch took it from.
type HeldItem struct {
	ID    string
	Token int64
	Score int64
}

// HeldArgs returns the KEYS and ARGV of a Confirm or Release call.
func HeldArgs(wakeCmd string, groups []HeldGroup) ([]string, []any) {
	n := 0
	for _, g := range groups {
		n += len(g.Items)
	}
	keys := make([]string, 0, 4*len(groups))
	args := make([]any, 0, 2+2*len(groups)+3*n)
	args = append(args, wakeCmd, len(groups))
	for _, g := range groups {
		keys = append(keys, g.Store, g.Prepare, g.Msg, g.Wake)
		typ := 3
		if g.Merges {
			typ = 1
		}
		args = append(args, typ, len(g.Items))
		for _, it := range g.Items {
			args = append(args, it.ID, it.Token, it.Score)
		}
	}
	return keys, args
}

// Confirm's codes, one per held delivery (confirm.lua).
const (
	HeldGone       = 0 // not this delivery's any more: drop it
	HeldDeliver    = 1 // hand it to its listener
	HeldNotYet     = 2 // not due by Redis's clock: hold it on
	HeldSuperseded = 3 // a fixed-time re-send replaced it: drop it
	HeldMerged     = 4 // a range-merge repeat merged into it: deliver it with the repeat's envelope and a new token
)

// ConfirmReply is confirm.lua's reply.
type ConfirmReply struct {
	NowUs     int64
	Codes     []int64
	Envelopes []string // one per HeldMerged code, in order
	Tokens    []int64  // the new delivery token of each HeldMerged code, in order
}

// ParseConfirmReply reads the reply of a Confirm call of n held deliveries.
func ParseConfirmReply(vals []any, n int) (ConfirmReply, error) {
	bad := func() (ConfirmReply, error) {
		return ConfirmReply{}, fmt.Errorf("rmq: confirm: unexpected reply of %d values", len(vals))
	}
	if len(vals) != 3 {
		return bad()
	}
	codes, ok1 := vals[1].([]any)
	envs, ok2 := vals[2].([]any)
	if !ok1 || !ok2 || len(codes) != n {
		return bad()
	}
	r := ConfirmReply{NowUs: toInt(vals[0]), Codes: make([]int64, n)}
	merged := 0
	for i, c := range codes {
		r.Codes[i] = toInt(c)
		if r.Codes[i] == HeldMerged {
			merged++
		}
	}
	if len(envs) != 2*merged {
		return bad()
	}
	for i := 0; i < len(envs); i += 2 {
		s, _ := envs[i].(string)
		r.Envelopes = append(r.Envelopes, s)
		r.Tokens = append(r.Tokens, toInt(envs[i+1]))
	}
	return r, nil
}
