package scripts

import (
	"fmt"
	"strconv"
	"strings"
)

// FetchCall describes one fetch.lua call, or one section of a call that
// carries several (MultiFetchArgs). Groups are slots of one topic; more
// than one group is for a single node only (on a cluster every call must
// stay within one hash slot), and fencing allows one group.
type FetchCall struct {
	TimeBased bool
	N         int    // the most messages to move in all
	LeaseSec  int64  // lease of each delivery
	Window    int    // store entries of a group read at a time
	Bound     string // "" or the score not to go past (see fetch.lua)
	// Lookahead (time-based only): Bound is taken even when it lies after
	// Redis's clock, so messages due up to it are moved too (fetch.lua's
	// mode 3). The caller holds those not yet due and hands them over at
	// their instant (Confirm) or returns them (Release).
	Lookahead bool
	Groups    []FetchGroup
	// Flow, when not nil, is the fetch's flow control (fetch.lua's flow
	// descriptor): with Grouped, every group names its group keys.
	Flow     *Flow
	EpochKey string // ZooKeeper mode: the slot's owner epoch key, with Epoch
	Epoch    int64
	// Events, when above 0, is the most events the slots' event logs keep
	// (lifelib.lua): every group names its slot's log (FetchGroup.Events),
	// and the call logs each message it hands over ("delivered") or drops
	// as expired ("expired"). 0: no log, and the call is what it is
	// without one (no key, no argument more).
	Events int64
}

// Flow is what a fetch is limited by (luascripts/flowlib.lua). A rate is a
// GCRA: an interval between starts and a tolerance, in µs (0: no rate).
type Flow struct {
	// Grouped: the topic's messages may carry groups; the fetch serves
	// them in turn (grouplib.lua). Every FetchGroup names its group keys.
	Grouped bool
	// GroupPlaces is the most deliveries of one group at once (0: none).
	GroupPlaces           int
	GroupRateIv, GroupTol float64
	TopicRateIv, TopicTol float64
	TopicConcurrency      int
	// TopicFlow is the topic's tflow key and Prepares the prepare set of
	// every slot of the topic: with a topic rate or concurrency (a single
	// node only; a cluster takes permits from permit.lua instead).
	TopicFlow string
	Prepares  []string
}

// topicKeys reports whether the fetch names the topic's keys.
func (f *Flow) topicKeys() bool {
	return f != nil && (f.TopicRateIv > 0 || f.TopicConcurrency > 0)
}

// descriptor is fetch.lua's flow descriptor: "" for none.
func (f *Flow) descriptor() string {
	if f == nil {
		return ""
	}
	grouped := 0
	if f.Grouped {
		grouped = 1
	}
	num := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	nprep := 0
	if f.TopicConcurrency > 0 {
		nprep = len(f.Prepares)
	}
	return strconv.Itoa(grouped) + " " + strconv.Itoa(f.GroupPlaces) + " " + num(f.GroupRateIv) + " " + num(f.GroupTol) + " " +
		num(f.TopicRateIv) + " " + num(f.TopicTol) + " " + strconv.Itoa(f.TopicConcurrency) + " " + strconv.Itoa(nprep)
}

// FetchGroup is one slot of a FetchCall.
type FetchGroup struct {
	Store, Prepare, Msg string
	Max                 int // the most to move from this slot; 0 reads its head only
	// Delayed is the slot's delayed set (priority topics). When any group
	// of a call names one, every group must; the call then moves due
	// delayed entries of the groups with CheckDelayed into store first.
	Delayed      string
	CheckDelayed bool
	// The slot's group keys (flowlib.lua), for a grouped Flow.
	GQ, GOcc, GTurn, GRate string
	// Events is the slot's event log (keyspace.LifeKeys.Events), named
	// when the call's Events is above 0.
	Events string
}

// Args returns the KEYS and ARGV of the call.
func (f FetchCall) Args() ([]string, []any) {
	keys := make([]string, 0, 4*len(f.Groups)+1)
	args := make([]any, 0, 7+2*len(f.Groups))
	keys, args = f.appendSection(keys, args)
	if f.EpochKey != "" {
		keys = append(keys, f.EpochKey)
		args = append(args, f.Epoch)
	}
	return keys, args
}

// appendSection appends the call's groups' KEYS and its ARGV as one
// section (see fetch.lua): mode, n, lease, window, bound, the groups'
// maxima and, with delayed sets, their checks.
func (f FetchCall) appendSection(keys []string, args []any) ([]string, []any) {
	delayed := !f.TimeBased && len(f.Groups) > 0 && f.Groups[0].Delayed != ""
	// Every group names its delayed set (read only in mode 2); a caller
	// that does not name one gets the slot's, derived from its store key.
	mode := "0"
	switch {
	case f.TimeBased && f.Lookahead:
		mode = "3"
	case f.TimeBased:
		mode = "1"
	case delayed:
		mode = "2"
	}
	if f.Events > 0 {
		// The log rides on the mode (fetch.lua): a fetch without one
		// sends what it always did.
		mode += " " + strconv.FormatInt(f.Events, 10)
	}
	args = append(args, mode, f.N, f.LeaseSec, f.Window, f.Bound, f.Flow.descriptor())
	grouped := f.Flow != nil && f.Flow.Grouped
	for _, g := range f.Groups {
		d := g.Delayed
		if d == "" {
			d = strings.TrimSuffix(g.Store, "store") + "delayed"
		}
		keys = append(keys, g.Store, g.Prepare, g.Msg, d)
		if grouped {
			keys = append(keys, g.GQ, g.GOcc, g.GTurn, g.GRate)
		}
		if f.Events > 0 {
			keys = append(keys, g.Events)
		}
		args = append(args, g.Max)
	}
	if delayed {
		for _, g := range f.Groups {
			check := 0
			if g.CheckDelayed {
				check = 1
			}
			args = append(args, check)
		}
	}
	if f.Flow.topicKeys() {
		keys = append(keys, f.Flow.TopicFlow)
		if f.Flow.TopicConcurrency > 0 {
			keys = append(keys, f.Flow.Prepares...)
		}
	}
	return keys, args
}

// MultiFetchArgs returns the KEYS and ARGV of one fetch.lua call that
// carries several fetches (sections), each taken as if called alone: for a
// single node only (the calls may name any slots of any topics) and without
// fencing (EpochKey is ignored). ParseMultiFetchReply reads its reply.
func MultiFetchArgs(calls []FetchCall) ([]string, []any) {
	n := 0
	for _, c := range calls {
		n += len(c.Groups)
	}
	keys := make([]string, 0, 4*n)
	args := make([]any, 0, 2+8*len(calls)+2*n)
	args = append(args, "M", len(calls))
	for _, c := range calls {
		args = append(args, len(c.Groups))
		keys, args = c.appendSection(keys, args)
	}
	return keys, args
}

// ParseMultiFetchReply splits the reply of a MultiFetchArgs call of n
// sections into one reply per section, in order. A section that failed
// in Redis (its keys hold the wrong type, say) has its error in errs; the
// others stand.
func ParseMultiFetchReply(vals []any, n int) (replies []FetchReply, errs []error, err error) {
	if len(vals) != n {
		return nil, nil, fmt.Errorf("rmq: fetch: %d section replies for %d sections", len(vals), n)
	}
	replies, errs = make([]FetchReply, n), make([]error, n)
	for i, v := range vals {
		switch x := v.(type) {
		case []any:
			replies[i], errs[i] = ParseFetchReply(x)
		case error:
			errs[i] = x
		default:
			errs[i] = fmt.Errorf("rmq: fetch: unexpected section reply %T", v)
		}
	}
	return replies, errs, nil
}

// FetchReply is fetch.lua's reply.
type FetchReply struct {
	NowUs int64     // Redis's clock when the script ran
	Heads []float64 // per group: first unblocked score; -1 empty, -2 all blocked
	// DelayedHeads, for calls with delayed sets: per group the due time
	// (ms) of the earliest delayed entry; -1 none, -3 not looked at.
	DelayedHeads []float64
	Expired      int // messages dropped because their expiry passed
	// TopicWait is 0, or the Redis ms from which the topic's rate allows
	// the next start (it allowed none), or -1: the topic is at its
	// concurrency limit (the end of a delivery wakes its slots).
	TopicWait int64
	// GroupWait is 0, or the earliest Redis ms at which a group held back
	// by its rate may start again (for heads reported -2).
	GroupWait int64
	Msgs      []Fetched // in consume order
}

// Fetched is one message moved to prepare.
type Fetched struct {
	Group    int // index into FetchCall.Groups
	ID       string
	Envelope string
	Token    int64
	Score    float64 // its store score
}

// ParseFetchReply reads the reply of a fetch.lua call.
func ParseFetchReply(vals []any) (FetchReply, error) {
	bad := func() (FetchReply, error) {
		return FetchReply{}, fmt.Errorf("rmq: fetch: unexpected reply of %d values", len(vals))
	}
	if len(vals) < 3 {
		return bad()
	}
	g, d := int(toInt(vals[1])), int(toInt(vals[2]))
	hdr := 3 + g + d + 3
	if g < 0 || (d != 0 && d != g) || len(vals) < hdr || (len(vals)-hdr)%5 != 0 {
		return bad()
	}
	r := FetchReply{NowUs: toInt(vals[0]), Heads: make([]float64, g), Expired: int(toInt(vals[hdr-3])),
		TopicWait: toInt(vals[hdr-2]), GroupWait: toInt(vals[hdr-1])}
	for i := range g {
		r.Heads[i] = toFloat(vals[3+i])
	}
	if d > 0 {
		r.DelayedHeads = make([]float64, d)
		for i := range d {
			r.DelayedHeads[i] = toFloat(vals[3+g+i])
		}
	}
	for j := hdr; j < len(vals); j += 5 {
		grp := int(toInt(vals[j])) - 1
		if grp < 0 || grp >= g {
			return bad()
		}
		id, _ := vals[j+1].(string)
		env, _ := vals[j+2].(string)
		r.Msgs = append(r.Msgs, Fetched{Group: grp, ID: id, Envelope: env, Token: toInt(vals[j+3]), Score: toFloat(vals[j+4])})
	}
	return r, nil
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseFloat(x, 64)
		return int64(n)
	}
	return 0
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case string:
		f, _ := strconv.ParseFloat(x, 64)
		return f
	}
	return 0
}
