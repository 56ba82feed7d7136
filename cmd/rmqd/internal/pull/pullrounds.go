package pull

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/rmq-go/rmq/internal/groupcommit"
	"github.com/rmq-go/rmq/topic"
)

// pullRounds gathers the consumes that arrive together and name the same
// queues with the same ttr into one Pull of all their counts, whose jobs are
// then dealt out in arrival order (a consume gets up to its count, the first
// to arrive first), as the publisher gathers publishes. A consume that
// finds a round in flight rides the next one. One Pull of n jobs is one
// fetch of n in the library (one read of the queue's head, one move of the
// n entries), where n Pulls of one each are n fetches, however they share
// a script call; and the request goroutines are woken once per round
// instead of each running a Pull of its own.
//
// Rounds only take what is ready: a consume that gets nothing and may wait
// (timeout > 0) then long-polls by itself (pool.pull), as before. A
// consume that may wait skips the round when a round of its queues found
// them drained within drainedFor: its long poll fetches first anyway, and
// a round before it would be one fetch more per poll of an empty queue
// (long polls on a trickle of jobs each re-poll after every job).
type pullRounds struct {
	p  *Pool
	gc *groupcommit.Group[*pullReq]

	mu      sync.Mutex
	drained map[pullKey]time.Time // when the last round of the key came back short
}

// DrainedFor is how long a round that came back short stands for its
// queues: long polls skip rounds meanwhile, and one after it looks again
// (a backlog that built up since then rides rounds again).
const DrainedFor = 100 * time.Millisecond

// maxDrainedKeys bounds the keys remembered; past it they are forgotten
// (a forgotten key costs a long poll one round).
const maxDrainedKeys = 10000

// pullRoundsInFlight is how many rounds may run at once: with one, the
// consumes that arrive during a round's round trip all ride the next.
const pullRoundsInFlight = 1

// maxRoundPull bounds the jobs one Pull of a round takes (a round whose
// consumes ask for more pulls again).
const maxRoundPull = 1024

// pullReq is one consume's part of a round.
type pullReq struct {
	topics []topic.Topic
	key    pullKey
	lease  time.Duration
	n      int
	jobs   []Job
	err    error
}

func newPullRounds(p *Pool) *pullRounds {
	r := &pullRounds{p: p, drained: map[pullKey]time.Time{}}
	r.gc = groupcommit.New(pullRoundsInFlight, r.run, nil)
	return r
}

// Pull takes up to n jobs that are ready now from topics (first topic
// first), leased for lease. It waits for its round even when ctx ends, so
// that no job is leased for a consume that left: a round is one round trip.
// With willWait (the consume long-polls if this finds nothing) it takes
// nothing, without a round, when the last round of these queues and lease
// found them drained.
func (r *pullRounds) Pull(ctx context.Context, topics []topic.Topic, n int, lease time.Duration, willWait bool) ([]Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	key := pullKeyOf(topics, lease)
	if willWait {
		r.mu.Lock()
		at, drained := r.drained[key]
		r.mu.Unlock()
		if drained && time.Since(at) < DrainedFor {
			return nil, nil
		}
	}
	req := &pullReq{topics: topics, key: key, lease: lease, n: n}
	_ = r.gc.Do(context.WithoutCancel(ctx), req)
	return req.jobs, req.err
}

// pullKey is what consumes must share to ride one Pull: the lease and the
// topics in order.
type pullKey struct {
	lease time.Duration
	names string // the topics' names, one per line
}

func pullKeyOf(topics []topic.Topic, lease time.Duration) pullKey {
	if len(topics) == 1 {
		return pullKey{lease, topics[0].Name()}
	}
	var b strings.Builder
	for i, t := range topics {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(t.Name())
	}
	return pullKey{lease, b.String()}
}

// run pulls for each set of requests that share a key, the sets side by
// side (their fetches then share the library's script calls).
func (r *pullRounds) run(ctx context.Context, batch []*pullReq) {
	var groups [][]*pullReq
	index := map[pullKey]int{}
	for _, q := range batch {
		i, ok := index[q.key]
		if !ok {
			i = len(groups)
			index[q.key] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], q)
	}
	if len(groups) == 1 {
		r.pullGroup(ctx, groups[0])
		return
	}
	var wg sync.WaitGroup
	for _, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.pullGroup(ctx, g)
		}()
	}
	wg.Wait()
}

// pullGroup pulls the requests' counts together and deals the jobs out in
// order; a request is done once it got its count or a Pull came back
// short (nothing more is ready).
func (r *pullRounds) pullGroup(ctx context.Context, reqs []*pullReq) {
	next := 0 // the first request not served yet
	for next < len(reqs) {
		want := 0
		for _, q := range reqs[next:] {
			want += q.n - len(q.jobs)
		}
		want = min(want, maxRoundPull)
		jobs, err := r.p.Pull(ctx, reqs[0].topics, want, reqs[0].lease, 0)
		if err == nil {
			r.noteDrained(reqs[0].key, len(jobs) < want)
		}
		if len(jobs) == 0 {
			for _, q := range reqs[next:] {
				q.err = err
			}
			return
		}
		short := len(jobs) < want
		for len(jobs) > 0 {
			q := reqs[next]
			k := min(q.n-len(q.jobs), len(jobs))
			q.jobs = append(q.jobs, jobs[:k]...)
			jobs = jobs[k:]
			if len(q.jobs) == q.n {
				next++
			}
		}
		if short {
			return // nothing more is ready
		}
	}
}

// noteDrained records whether a round of key took less than it asked for.
func (r *pullRounds) noteDrained(key pullKey, drained bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !drained {
		delete(r.drained, key)
		return
	}
	if len(r.drained) >= maxDrainedKeys {
		clear(r.drained)
	}
	r.drained[key] = time.Now()
}
