package scripts

import (
	"fmt"
	"strconv"

	"github.com/rmq-go/rmq/internal/keyspace"
)

// GSendGroup is one slot's part of a gsend.lua call: messages of one
// topic slot that carry a group (their options block names it).
type GSendGroup struct {
	Store, Prepare, Msg, Wake, Delayed string
	Queue, Turn                        string // the slot's group keys
	// Uniq and UniqNonce are the slot's unique-send keys
	// (keyspace.UniqueKeys), named only when a message is a unique send.
	Uniq, UniqNonce string
	// EventLog is the slot's event log and Events about how many events it
	// keeps, when the topic has one (Events > 0): each message stored
	// records "sent".
	EventLog string
	Events   int64
	Type     int // 1 range-merge, 2 priority, 3 fixed-time
	Msgs     []GSendMsg
}

// GSendMsg is one message of a GSendGroup.
type GSendMsg struct {
	ID    string
	Score string // due ms, priority, or the range in ms for range-merge
	Nonce string
	// Unique is the window of a unique send in ms (producer.WithUniqueFor);
	// 0 for none.
	Unique int64
	Opts   []byte // options block: names the group
	Body   []byte
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
	// A group with unique sends says so in its type (+8), names the
	// slot's unique keys and gives each message its window; a group
	// without pays nothing for them.
	uniq := make([]bool, len(groups))
	for i, g := range groups {
		keys = append(keys, g.Store, g.Prepare, g.Msg, g.Wake, g.Delayed, g.Queue, g.Turn)
		typ := g.Type
		for _, m := range g.Msgs {
			uniq[i] = uniq[i] || m.Unique > 0
		}
		if uniq[i] {
			typ += 8
			keys = append(keys, g.Uniq, g.UniqNonce)
		}
		if g.Events > 0 {
			keys = append(keys, g.EventLog)
			args = append(args, typ+16, len(g.Msgs), g.Events)
			continue
		}
		args = append(args, typ, len(g.Msgs))
	}
	for i, g := range groups {
		for _, m := range g.Msgs {
			if uniq[i] {
				args = append(args, m.ID, m.Score, m.Nonce, m.Unique, m.Opts, m.Body)
			} else {
				args = append(args, m.ID, m.Score, m.Nonce, m.Opts, m.Body)
			}
		}
	}
	return keys, args
}

// PermitCall is one permit.lua call: a client's permits of a topic's
// limits on a cluster.
type PermitCall struct {
	Keys keyspace.FlowKeys
	// ID names the call: unique per call, the same when go-redis sends it
	// again, so a resent call changes nothing twice.
	ID          string
	Want        int
	Refund      int   // rate starts taken and not used
	ReserveMs   int64 // the lease of the reservations granted
	RateIv      float64
	RateTol     float64     // µs; 0: no rate
	Concurrency int         // 0: none
	Release     []string    // reservations not used
	Bind        []PlaceBind // deliveries that took a reservation
	End         []PlaceEnd  // deliveries that ended
	Renew       []PlaceRenew
}

// PlaceBind binds a leased delivery to the reservation it used ("" for
// none): it holds the place under its own lease from then on.
type PlaceBind struct {
	Reservation, Member string
	Token               int64
	LeaseMs             int64
}

// PlaceEnd gives back the place of a delivery that ended; Token -1 for
// whichever delivery of Member holds one (an ack by id).
type PlaceEnd struct {
	Member string
	Token  int64
}

// PlaceRenew extends the lease of a delivery's place to LeaseMs from now.
type PlaceRenew struct {
	Member  string
	LeaseMs int64
}

// PlaceMember is the member of a delivery's place: its slot and id.
func PlaceMember(slot int, id string) string { return strconv.Itoa(slot) + ":" + id }

// Reservation is the member of the i-th (from 1) place a call reserved.
func Reservation(callID string, i int) string { return "r:" + callID + ":" + strconv.Itoa(i) }

// Args returns the call's KEYS and ARGV.
func (p PermitCall) Args() ([]string, []any) {
	num := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	args := make([]any, 0, 11+len(p.Release)+4*len(p.Bind)+2*len(p.End)+2*len(p.Renew))
	args = append(args, p.ID, p.Want, p.Refund, p.ReserveMs, num(p.RateIv), num(p.RateTol), p.Concurrency,
		len(p.Release), len(p.Bind), len(p.End), len(p.Renew))
	for _, r := range p.Release {
		args = append(args, r)
	}
	for _, b := range p.Bind {
		args = append(args, b.Reservation, b.Member, strconv.FormatInt(b.Token, 10), b.LeaseMs)
	}
	for _, e := range p.End {
		tok := ""
		if e.Token >= 0 {
			tok = strconv.FormatInt(e.Token, 10)
		}
		args = append(args, e.Member, tok)
	}
	for _, r := range p.Renew {
		args = append(args, r.Member, r.LeaseMs)
	}
	k := p.Keys
	return []string{k.Flow, k.Holders, k.Permits, k.Places, k.Tokens}, args
}

// PermitReply is permit.lua's answer.
type PermitReply struct {
	Granted int
	// Wait is 0, the Redis ms (of the flow node) from which the rate
	// allows the next start, or -1: no place was free.
	Wait int64
	// Woke: places came free while a client waited for one.
	Woke bool
	// Expiry, with Wait -1: the Redis ms at which the first place lapses
	// (a killed client's places free then).
	Expiry int64
	// NowMs is the flow node's clock: Wait and Expiry are read as
	// durations from it, never against another node's clock.
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
