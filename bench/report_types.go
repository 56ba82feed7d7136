package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"
)

// rmqSystems returns the RMQ systems of a run, one per message type.
func rmqSystems(systems []system) []*rmqSys {
	var out []*rmqSys
	for _, s := range systems {
		if r, ok := s.(*rmqSys); ok {
			out = append(out, r)
		}
	}
	return out
}

// printTypes prints RMQ's figures per message type (-types with more than
// one type): medians of the throughput cases, memory per waiting message,
// and the lateness of the time-based types.
func printTypes(w io.Writer, o options, systems []system, res *results) {
	rs := rmqSystems(systems)
	if len(rs) < 2 {
		return
	}
	rate := func(id string, r *rmqSys) string {
		s := res.lookup(id, r.name())
		if s == nil || len(s.costs) == 0 {
			return "—"
		}
		return thousands(medianOf(s.costs, func(c costs) float64 { return c.rate }))
	}
	fmt.Fprintf(w, "\nRMQ for Go per message type (msg/s, medians of %d runs):\n\n", o.runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "type\tproduce, 1 goroutine\tproduce, %d goroutines\tbatch\tconsume+ack\tconsume+ack, prefetch %d\tmemory B/msg\t\n", o.producers, o.prefetch)
	for _, r := range rs {
		mem := "—"
		if s := res.lookup("memory", r.name()); s != nil {
			mem = thousands(s.memPerMsg)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.typ, rate("produce1", r), rate("produce32", r),
			rate("batch", r), rate("consume", r), rate("consumepf", r), mem)
	}
	tw.Flush()

	if !o.cases["lateness"] {
		return
	}
	fmt.Fprintf(w, "\nlateness (handler call − Message.DueAt), each message sent %v ahead; priority messages have no due time:\n\n", o.lead)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "type\twaiting\tdue msg/s\tfor\tfired\tlate p50\tlate p99\tlate max\tearly\t\n")
	phases := []struct {
		prefix  string
		waiting int
	}{{"late:", 0}}
	if o.waiting > 0 {
		phases = append(phases, struct {
			prefix  string
			waiting int
		}{"huge:", o.waiting})
	}
	for _, r := range rs {
		for _, ph := range phases {
			for _, ls := range o.late {
				s := res.lookup(ph.prefix+strconv.Itoa(ls.rate), r.name())
				if s == nil || len(s.lat) == 0 {
					continue
				}
				sent, fired, early := 0, 0, 0
				for _, l := range s.lat {
					sent += l.sent
					fired += l.fired
					early += l.early
				}
				med := func(f func(latResult) time.Duration) string {
					return fmtMs(medianOf(s.lat, func(l latResult) float64 { return ms(f(l)) }))
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%d/%d\t%s\t%s\t%s\t%d\t\n", r.typ, thousands(float64(ph.waiting)),
					thousands(float64(ls.rate)), ls.duration, fired, sent,
					med(func(l latResult) time.Duration { return l.p50 }),
					med(func(l latResult) time.Duration { return l.p99 }),
					med(func(l latResult) time.Duration { return l.max }), early)
			}
		}
	}
	tw.Flush()
}

// problems lists what RMQ must never do and did: lose a message (never
// fired), deliver one twice, fire one early. The bench exits 1 on any.
func problems(systems []system, res *results) []string {
	var out []string
	for _, r := range rmqSystems(systems) {
		for id, bySys := range res.m {
			s := bySys[r.name()]
			if s == nil {
				continue
			}
			for i, l := range s.lat {
				run := fmt.Sprintf("%s %s run %d", r.name(), id, i+1)
				if l.fired < l.sent {
					out = append(out, fmt.Sprintf("%s: %d of %d never fired", run, l.sent-l.fired, l.sent))
				}
				if l.extra > 0 {
					out = append(out, fmt.Sprintf("%s: %d duplicate deliveries", run, l.extra))
				}
				if l.early > 0 {
					out = append(out, fmt.Sprintf("%s: %d fired early", run, l.early))
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// finite turns the "never fired" infinity of a lateness figure into nil,
// which JSON can carry.
func finite(f float64) *float64 {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil
	}
	return &f
}
