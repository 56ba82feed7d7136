package scripts

import "fmt"

// HeldGroup is one slot's deliveries held since a lookahead fetch, for a
// Confirm or Release call (a single node: groups of any topics share one).
type HeldGroup struct {
	Store, Prepare, Msg, Wake string
	Items                     []HeldItem
}

// HeldItem is one held delivery: its id, its held delivery token and the
// store score (due ms) the fetch took it from.
type HeldItem struct {
	ID    string
	Token int64
	Score int64
}

// HeldToken is the least held delivery token (lib.lua): a message taken
// ahead of its instant by a lookahead fetch carries one until Confirm hands
// it over with the token HeldToken lower.
const HeldToken = 500000

// IsHeld reports whether token is a held delivery's.
func IsHeld(token int64) bool { return token >= HeldToken }

// ConfirmArgs returns the KEYS and ARGV of a Confirm call.
func ConfirmArgs(groups []HeldGroup) ([]string, []any) {
	keys := make([]string, 0, len(groups))
	args := heldItemArgs(groups)
	for _, g := range groups {
		keys = append(keys, g.Prepare)
	}
	return keys, args
}

// ReleaseArgs returns the KEYS and ARGV of a Release call.
func ReleaseArgs(wakeCmd string, groups []HeldGroup) ([]string, []any) {
	keys := make([]string, 0, 4*len(groups))
	for _, g := range groups {
		keys = append(keys, g.Store, g.Prepare, g.Msg, g.Wake)
	}
	return keys, append([]any{wakeCmd}, heldItemArgs(groups)...)
}

// heldItemArgs is G, then per group k and k triples of id, token, score.
func heldItemArgs(groups []HeldGroup) []any {
	n := 0
	for _, g := range groups {
		n += len(g.Items)
	}
	args := make([]any, 0, 1+len(groups)+3*n)
	args = append(args, len(groups))
	for _, g := range groups {
		args = append(args, len(g.Items))
		for _, it := range g.Items {
			args = append(args, it.ID, it.Token, it.Score)
		}
	}
	return args
}

// Confirm's codes, one per held delivery (confirm.lua).
const (
	HeldGone    = 0 // not this delivery's any more: drop it
	HeldDeliver = 1 // hand it to its listener, with its new token
	HeldNotYet  = 2 // not due by Redis's clock: hold it on
)

// ConfirmReply is confirm.lua's reply.
type ConfirmReply struct {
	NowUs  int64
	Codes  []int64
	Tokens []int64 // the delivery token of each HeldDeliver code, in order
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
	tokens, ok2 := vals[2].([]any)
	if !ok1 || !ok2 || len(codes) != n {
		return bad()
	}
	r := ConfirmReply{NowUs: toInt(vals[0]), Codes: make([]int64, n)}
	delivered := 0
	for i, c := range codes {
		r.Codes[i] = toInt(c)
		if r.Codes[i] == HeldDeliver {
			delivered++
		}
	}
	if len(tokens) != delivered {
		return bad()
	}
	r.Tokens = make([]int64, delivered)
	for i, t := range tokens {
		r.Tokens[i] = toInt(t)
	}
	return r, nil
}
