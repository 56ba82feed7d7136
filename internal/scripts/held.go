package scripts

import (
	"fmt"
	"math/rand/v2"
	"strconv"
)

// HeldGroup is one slot's deliveries held since a lookahead fetch, for a
// Confirm or Release call (a single node: groups of any topics share one).
type HeldGroup struct {
	Store, Prepare, Msg, Wake string
	Items                     []HeldItem
	// Events is the slot's event log (keyspace.LifeKeys.Events) and
	// EventsMax the most it keeps, for a Confirm call, which logs each
	// delivery it hands over; EventsMax 0: no log (Release logs nothing:
	// a held message given back was never delivered).
	Events    string
	EventsMax int64
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
// it over with the token HeldToken lower. A token is no delivery's identity
// (another delivery of the id may get the same one): a Confirm call knows
// what the client handed over before by its records (ConfirmArgs), never
// by a token.
const HeldToken = 500000

// IsHeld reports whether token is a held delivery's.
func IsHeld(token int64) bool { return token >= HeldToken }

// ConfirmNonce draws the nonce of one Confirm call.
func ConfirmNonce() string {
	return strconv.FormatUint(rand.Uint64(), 36) + strconv.FormatUint(rand.Uint64(), 36)
}

// ConfirmArgs returns the KEYS and ARGV of one Confirm call, with a nonce
// of its own: go-redis resends these same arguments when a reply was lost,
// and the resent call finds what its earlier run handed over in its
// records (confirm.lua). Every call is a new one: build the arguments once
// per call.
func ConfirmArgs(groups []HeldGroup) ([]string, []any) {
	return ConfirmArgsNonce(ConfirmNonce(), groups)
}

// ConfirmArgsNonce is ConfirmArgs with the call's nonce given, naming
// records, the record keys (ConfirmRecordKey) of earlier calls over some
// of the items that failed on the client's side and may have run: what
// they handed over is handed over again. (Tests also run one call twice
// with it, as go-redis does.)
func ConfirmArgsNonce(nonce string, groups []HeldGroup, records ...string) ([]string, []any) {
	keys := make([]string, 0, len(groups)+1+len(records))
	for _, g := range groups {
		keys = append(keys, g.Prepare)
	}
	keys = append(keys, ConfirmRecordKey(groups, nonce))
	keys = append(keys, records...)
	logs := 0
	for _, g := range groups {
		if g.EventsMax > 0 {
			keys = append(keys, g.Events)
			logs++
		}
	}
	args := heldItemArgs(groups, true)
	if logs > 0 {
		args[0] = strconv.Itoa(len(groups)) + " " + strconv.Itoa(logs)
	}
	return keys, args
}

// ConfirmRecordKey is the key under which a Confirm call with nonce over
// groups records what it handed over (confirm.lua): in the first group's
// hash tag, after its prepare key's name.
func ConfirmRecordKey(groups []HeldGroup, nonce string) string {
	if len(groups) == 0 {
		return "confirm:" + nonce
	}
	return groups[0].Prepare + ":confirm:" + nonce
}

// ReleaseArgs returns the KEYS and ARGV of a Release call.
func ReleaseArgs(wakeCmd string, groups []HeldGroup) ([]string, []any) {
	keys := make([]string, 0, 4*len(groups))
	for _, g := range groups {
		keys = append(keys, g.Store, g.Prepare, g.Msg, g.Wake)
	}
	return keys, append([]any{wakeCmd}, heldItemArgs(groups, false)...)
}

// heldItemArgs is G, then per group k and k triples of id, token, score;
// with logs, a group's k is "k max" when it logs events (confirm.lua).
func heldItemArgs(groups []HeldGroup, logs bool) []any {
	n := 0
	for _, g := range groups {
		n += len(g.Items)
	}
	args := make([]any, 0, 1+len(groups)+3*n)
	args = append(args, len(groups))
	for _, g := range groups {
		if logs && g.EventsMax > 0 {
			args = append(args, strconv.Itoa(len(g.Items))+" "+strconv.FormatInt(g.EventsMax, 10))
		} else {
			args = append(args, len(g.Items))
		}
		for _, it := range g.Items {
			args = append(args, it.ID, it.Token, it.Score)
		}
	}
	return args
}

// Confirm's codes, one per held delivery (confirm.lua).
const (
	HeldGone    = 0 // not this delivery's any more: drop it
	HeldDeliver = 1 // hand it to its listener, with its new token (or the one a record names)
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
