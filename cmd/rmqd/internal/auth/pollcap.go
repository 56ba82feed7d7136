package auth

import (
	"errors"
	"net/http"
	"sync"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/quota"
)

// Long polls hold a goroutine, a request's buffers and, on queues that do
// not exist yet, a place in the queue watch's HMGET every watchPoll: a
// token could hold any number of them (2,000 polls naming 100 unknown
// queues each took 540 MB and made one HMGET of 200,000 fields every
// 200 ms). pollCaps bounds them per token and per process, and the names
// of unknown queues they watch likewise; beyond a bound the consume
// answers 429 (lmstfy's answer to a throttled consume).
type PollCaps struct {
	maxPolls, maxPollsPerToken int
	maxNames, maxNamesPerToken int

	mu    sync.Mutex
	polls int
	names int
	use   map[TokenRef]*pollUse
}

type pollUse struct{ polls, names int }

var (
	errTooManyPolls   = errors.New("too many long polls")
	ErrTooManyWatched = errors.New("too many unknown queues watched")
)

func NewPollCaps(q quota.Quotas) *PollCaps {
	return &PollCaps{maxPolls: q.MaxLongPolls, maxPollsPerToken: q.MaxLongPollsPerToken,
		maxNames: q.MaxWatched, maxNamesPerToken: q.MaxWatchedPerToken, use: map[TokenRef]*pollUse{}}
}

// over reports whether adding n to cur passes max (0: no bound).
func over(cur, n, max int) bool { return max > 0 && cur+n > max }

// Poll takes a long poll of ref; release gives it back.
func (c *PollCaps) Poll(ref TokenRef) (release func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.use[ref]
	if u == nil {
		u = &pollUse{}
	}
	if over(c.polls, 1, c.maxPolls) || over(u.polls, 1, c.maxPollsPerToken) {
		return nil, errTooManyPolls
	}
	c.use[ref] = u
	u.polls++
	c.polls++
	return func() { c.give(ref, 1, 0) }, nil
}

// Watch takes n watched names of ref; release gives them back.
func (c *PollCaps) Watch(ref TokenRef, n int) (release func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.use[ref]
	if u == nil {
		u = &pollUse{}
	}
	if over(c.names, n, c.maxNames) || over(u.names, n, c.maxNamesPerToken) {
		return nil, ErrTooManyWatched
	}
	c.use[ref] = u
	u.names += n
	c.names += n
	return func() { c.give(ref, 0, n) }, nil
}

func (c *PollCaps) give(ref TokenRef, polls, names int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.use[ref]
	u.polls -= polls
	u.names -= names
	c.polls -= polls
	c.names -= names
	if u.polls == 0 && u.names == 0 {
		delete(c.use, ref)
	}
}

// WritePollRefused answers a consume beyond a cap.
func WritePollRefused(w http.ResponseWriter, err error) {
	msg := "too many long polls, please retry later"
	if errors.Is(err, ErrTooManyWatched) {
		msg = "too many queues that do not exist yet watched by long polls, please retry later"
	}
	respond.WriteJSON(w, http.StatusTooManyRequests, respond.MsgBody{Msg: msg})
}
