package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// sample is what one system produced in one case, over the runs.
type sample struct {
	costs       []costs     // throughput cases
	lat         []latResult // lateness cases
	unsupported bool
	memPerMsg   float64 // memory case: bytes
	memN        int
	loadRate    float64 // huge case: load msgs/s
}

type results struct {
	m      map[string]map[string]*sample // case id -> system name -> sample
	topics []topicsResult                // the topics case (topics.go), one per N
	http   []httpServerResult            // the http case (http.go), one per server
	// httpCeiling: an empty in-process handler's PUTs/s with the same
	// client (http_ceiling.go); 0 when not measured.
	httpCeiling float64
	flow        *flowResults    // the flow case (flow.go)
	life        *lifeResults    // the life case (life.go)
	flows       *flowsResults   // the flows case (flows.go)
	history     *historyResults // the history case (history.go)
}

func newResults() *results { return &results{m: map[string]map[string]*sample{}} }

func (r *results) get(caseID, sys string) *sample {
	if r.m[caseID] == nil {
		r.m[caseID] = map[string]*sample{}
	}
	if r.m[caseID][sys] == nil {
		r.m[caseID][sys] = &sample{}
	}
	return r.m[caseID][sys]
}

func (r *results) lookup(caseID, sys string) *sample {
	return r.m[caseID][sys]
}

type runner struct {
	o     options
	rdb   *redis.Client
	admin *redis.Client
	cnt   *counters
	res   *results
}

func (b *runner) meter(ctx context.Context) *meter {
	return &meter{ctx: ctx, admin: b.admin, c: b.cnt}
}

// reset empties Redis and collects garbage between cases, so no case pays
// for the one before it.
func (b *runner) reset(ctx context.Context) error {
	runtime.GC()
	return b.admin.FlushAll(ctx).Err()
}

func (b *runner) all(ctx context.Context, systems []system) error {
	progress("warming up")
	for _, s := range systems {
		if err := s.produce(ctx, b.meter(ctx), "warm", 2000, 32); err != nil {
			return fmt.Errorf("%s: warm-up: %w", s.name(), err)
		}
		if err := s.consume(ctx, b.meter(ctx), "warmc", 2000, 0); err != nil {
			return fmt.Errorf("%s: warm-up: %w", s.name(), err)
		}
		if err := b.reset(ctx); err != nil {
			return err
		}
	}
	for r := range b.o.runs {
		// Alternate which system goes first, so drift hits both alike.
		order := systems
		if r%2 == 1 {
			order = slices.Clone(systems)
			slices.Reverse(order)
		}
		if err := b.runOnce(ctx, r, order); err != nil {
			return err
		}
	}
	if b.o.cases["memory"] && b.o.memN > 0 {
		for _, s := range systems {
			if err := b.memory(ctx, s); err != nil {
				return fmt.Errorf("%s: memory: %w", s.name(), err)
			}
		}
	}
	if b.o.waiting > 0 {
		for _, s := range systems {
			if _, isAsynq := s.(*asynqSys); (isAsynq && !b.o.hugeAsynq) || !s.timeBased() {
				continue
			}
			if _, isBull := s.(*bullSys); isBull {
				continue // millions of addBulk jobs: not measured
			}
			if err := b.hugeCase(ctx, s); err != nil {
				return fmt.Errorf("%s: huge: %w", s.name(), err)
			}
		}
	}
	return nil
}

func (b *runner) runOnce(ctx context.Context, r int, systems []system) error {
	o := b.o
	type tcase struct {
		id  string
		n   int
		run func(s system, m *meter, q string) error
	}
	cases := []tcase{
		{"produce1", o.n, func(s system, m *meter, q string) error { return s.produce(ctx, m, q, o.n, 1) }},
		{"produce32", o.n, func(s system, m *meter, q string) error { return s.produce(ctx, m, q, o.n, o.producers) }},
		{"batch", o.batchN, func(s system, m *meter, q string) error {
			return s.produceBatch(ctx, m, q, o.batchN, o.batchG, o.batch)
		}},
		{"consume", o.n, func(s system, m *meter, q string) error { return s.consume(ctx, m, q, o.n, 0) }},
		{"consumepf", o.n, func(s system, m *meter, q string) error { return s.consume(ctx, m, q, o.n, o.prefetch) }},
	}
	for _, c := range cases {
		if !o.cases[c.id] {
			continue
		}
		for _, s := range systems {
			progress("run %d/%d: %s: %s", r+1, o.runs, s.name(), c.id)
			m := b.meter(ctx)
			if o.cpuProfile != "" {
				m.profile = fmt.Sprintf("%s-%s-%s-r%d.pprof", o.cpuProfile, c.id, s.id(), r+1)
			}
			err := c.run(s, m, fmt.Sprintf("%s-r%d", c.id, r))
			smp := b.res.get(c.id, s.name())
			switch {
			case errors.Is(err, errUnsupported):
				smp.unsupported = true
			case err != nil:
				return fmt.Errorf("%s: %s: %w", s.name(), c.id, err)
			default:
				smp.costs = append(smp.costs, m.costs(c.n))
			}
			if err := b.reset(ctx); err != nil {
				return err
			}
		}
	}
	if o.cases["lateness"] {
		for _, ls := range o.late {
			id := "late:" + strconv.Itoa(ls.rate)
			for _, s := range systems {
				if !s.timeBased() {
					continue // priority messages have no due time
				}
				progress("run %d/%d: %s: lateness, %d msgs/s coming due for %v", r+1, o.runs, s.name(), ls.rate, ls.duration)
				lr, err := s.lateness(ctx, fmt.Sprintf("late%d-r%d", ls.rate, r), latCase{rate: ls.rate, duration: ls.duration, lead: o.lead, tag: "l" + strconv.Itoa(r)})
				if err != nil {
					return fmt.Errorf("%s: %s: %w", s.name(), id, err)
				}
				smp := b.res.get(id, s.name())
				smp.lat = append(smp.lat, lr)
				if err := b.reset(ctx); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// usedMemory is INFO memory used_memory without client buffers (which
// depend on the last requests, not on what is stored).
func (b *runner) usedMemory(ctx context.Context) (int64, error) {
	info, err := b.admin.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	var used, clients int64
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "used_memory":
			used = n
		case "mem_clients_normal":
			clients = n
		}
	}
	return used - clients, nil
}

// memory loads 1,000 waiting messages (so every structure and script
// exists), then memN more, and divides the growth of used_memory by memN.
func (b *runner) memory(ctx context.Context, s system) error {
	progress("%s: memory per waiting message, %d messages", s.name(), b.o.memN)
	if err := b.reset(ctx); err != nil {
		return err
	}
	if err := s.loadFarFuture(ctx, "mem", "w", 1000); err != nil {
		return err
	}
	before, err := b.usedMemory(ctx)
	if err != nil {
		return err
	}
	if err := s.loadFarFuture(ctx, "mem", "m", b.o.memN); err != nil {
		return err
	}
	after, err := b.usedMemory(ctx)
	if err != nil {
		return err
	}
	smp := b.res.get("memory", s.name())
	smp.memPerMsg, smp.memN = float64(after-before)/float64(b.o.memN), b.o.memN
	return b.reset(ctx)
}

// hugeCase loads -waiting far-future messages into one queue and runs the
// lateness cases on that queue.
func (b *runner) hugeCase(ctx context.Context, s system) error {
	if err := b.reset(ctx); err != nil {
		return err
	}
	progress("%s: loading %d far-future messages", s.name(), b.o.waiting)
	start := time.Now()
	const chunk = 1_000_000
	for done := 0; done < b.o.waiting; done += chunk {
		n := min(chunk, b.o.waiting-done)
		if err := s.loadFarFuture(ctx, "huge", "h"+strconv.Itoa(done/chunk), n); err != nil {
			return err
		}
		progress("%s: loaded %d in %v", s.name(), done+n, time.Since(start).Round(time.Second))
	}
	loadRate := float64(b.o.waiting) / time.Since(start).Seconds()
	for r := range b.o.runs {
		for _, ls := range b.o.late {
			id := "huge:" + strconv.Itoa(ls.rate)
			progress("run %d/%d: %s: lateness with %d waiting, %d msgs/s coming due for %v", r+1, b.o.runs, s.name(), b.o.waiting, ls.rate, ls.duration)
			lr, err := s.lateness(ctx, "huge", latCase{rate: ls.rate, duration: ls.duration, lead: b.o.lead, tag: fmt.Sprintf("L%dx%d", ls.rate, r)})
			if err != nil {
				return err
			}
			smp := b.res.get(id, s.name())
			smp.lat = append(smp.lat, lr)
			smp.loadRate = loadRate
			runtime.GC()
		}
	}
	progress("%s: flushing", s.name())
	return b.reset(ctx)
}
