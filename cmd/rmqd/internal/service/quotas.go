package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/rmq-go/rmq/rmq"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"
)

// quotas bound what one tenant (a namespace's token) may make rmqd and
// Redis hold or do. lmstfy has none of them; each is a flag, and 0 turns
// it off (the zero value bounds nothing, as the tests' services use).
type Quotas struct {
	// MaxSchedules is the most schedules one namespace may have through
	// rmqd (per pool).
	MaxSchedules int
	// MinScheduleInterval is the shortest time between two ticks of a
	// schedule set through rmqd.
	MinScheduleInterval time.Duration
	// PrivateInfo puts /info (every namespace and queue of a pool) behind
	// the admin accounts; lmstfy serves it to anyone, the default here.
	PrivateInfo bool
	// MaxLongPolls and MaxLongPollsPerToken bound the long polls waiting
	// at once in this process, and per token; MaxWatched and
	// MaxWatchedPerToken the names of queues that do not exist yet that
	// they wait on (pollcap.go).
	MaxLongPolls, MaxLongPollsPerToken int
	MaxWatched, MaxWatchedPerToken     int
	// MaxQueuesPerToken is the most queues one token may create (its
	// first publish or schedule on a name nobody used).
	MaxQueuesPerToken int
	// MaxBulkMemory bounds the bytes of bulk publish bodies handled at
	// once (bulkbody.go).
	MaxBulkMemory int64
}

// Defaults of the flags.
const (
	defaultMaxQueuesPerToken   = 1000
	defaultMaxBulkMemory       = 128 << 20
	defaultMaxSchedules        = 100
	defaultMinScheduleInterval = time.Minute
)

func (q *Quotas) Flags(fs *flag.FlagSet) {
	fs.IntVar(&q.MaxSchedules, "max-schedules", defaultMaxSchedules, "most schedules one namespace may have (per pool; 0: no bound); beyond: 403")
	fs.BoolVar(&q.PrivateInfo, "private-info", false, "serve /info (every namespace and queue) only behind --admin-account; lmstfy serves it to anyone, the default")
	fs.IntVar(&q.MaxLongPolls, "max-long-polls", defaultMaxLongPolls, "long polls (consumes with a timeout) waiting at once in this process (0: no bound); beyond: 429")
	fs.IntVar(&q.MaxLongPollsPerToken, "max-long-polls-per-token", defaultMaxLongPollsPerToken, "long polls waiting at once per token in this process (0: no bound); beyond: 429")
	fs.IntVar(&q.MaxWatched, "max-watched-queues", defaultMaxWatched, "names of queues that do not exist yet that long polls wait on in this process, summed over the polls (0: no bound); beyond: 429")
	fs.IntVar(&q.MaxWatchedPerToken, "max-watched-queues-per-token", defaultMaxWatchedPerToken, "names of queues that do not exist yet that one token's long polls wait on, summed over its polls (0: no bound); beyond: 429")
	fs.IntVar(&q.MaxQueuesPerToken, "max-queues-per-token", defaultMaxQueuesPerToken, "queues one token may create (0: no bound); a publish or schedule that would create one more answers 403")
	fs.Int64Var(&q.MaxBulkMemory, "max-bulk-memory", defaultMaxBulkMemory, "bytes of bulk publish bodies handled at once (up to 64 MiB each; 0: no bound); more wait for their turn")
	fs.DurationVar(&q.MinScheduleInterval, "min-schedule-interval", defaultMinScheduleInterval, "shortest time between two ticks of a schedule (0: no bound); a spec that ticks more often answers 400")
}

// scheduleTicksChecked is how many ticks of a spec are looked at for the
// shortest gap: a cron spec repeats within a year, and a burst of ticks
// close together (0,1 * * * * *) shows in its first ticks.
const scheduleTicksChecked = 64

// checkInterval returns the 400 text for a spec that ticks more often
// than q allows, or "".
func (q Quotas) checkInterval(sc rmq.Schedule, now time.Time) string {
	if q.MinScheduleInterval <= 0 {
		return ""
	}
	ticks, err := rmq.NextTicks(sc.Spec, sc.Location, now, scheduleTicksChecked)
	if err != nil {
		return "" // Set answers the spec's error
	}
	for i := 1; i < len(ticks); i++ {
		if ticks[i].Sub(ticks[i-1]) < q.MinScheduleInterval {
			return "invalid spec: ticks less than " + q.MinScheduleInterval.String() + " apart (--min-schedule-interval)"
		}
	}
	return ""
}

// errTooManySchedules: the namespace holds MaxSchedules already.
var errTooManySchedules = errors.New("too many schedules")

// scheduleIndex is the SET of the library names of the schedules a
// namespace made through rmqd: it counts them per namespace without
// reading the schedules (a queue's name may be hashed into its topic's,
// so the namespace cannot be read back from a schedule's name).
func (p *Pool) scheduleIndex(ns string) string { return p.prefix + ":rmqd:schedules:" + ns }

// reserveSchedule adds name to ns's schedules before it is set, refusing
// it beyond max. added says whether name is new there (to be dropped again
// by unreserveSchedule when the set fails). Names whose schedule is gone
// (removed by another program) are dropped from the count first.
func (p *Pool) reserveSchedule(ctx context.Context, ns, name string, max int) (added bool, err error) {
	if max <= 0 {
		return false, nil
	}
	key := p.scheduleIndex(ns)
	n, err := p.rdb.SAdd(ctx, key, name).Result()
	if err != nil || n == 0 {
		return false, err
	}
	count, err := p.rdb.SCard(ctx, key).Result()
	if err != nil {
		p.unreserveSchedule(ns, name)
		return false, err
	}
	if count <= int64(max) {
		return true, nil
	}
	members, err := p.rdb.SMembers(ctx, key).Result()
	if err == nil {
		var exist []bool
		if exist, err = p.client.Schedules().Exist(ctx, members...); err == nil {
			var gone []any
			for i, m := range members {
				if !exist[i] && m != name {
					gone = append(gone, m)
				}
			}
			if len(gone) > 0 {
				err = p.rdb.SRem(ctx, key, gone...).Err()
			}
			count -= int64(len(gone))
		}
	}
	if err != nil || count > int64(max) {
		p.unreserveSchedule(ns, name)
		if err == nil {
			err = errTooManySchedules
		}
		return false, err
	}
	return true, nil
}

// unreserveSchedule drops name from ns's schedules (a failed set, a
// removal). It runs on its own context: the request's may be gone.
func (p *Pool) unreserveSchedule(ns, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.rdb.SRem(ctx, p.scheduleIndex(ns), name).Err()
}

// writeQuota answers 403 for a quota reached.
func writeQuota(w http.ResponseWriter, what string, max int, flagName string) {
	respond.WriteError(w, http.StatusForbidden, fmt.Sprintf("%s: at most %s (--%s)", what, strconv.Itoa(max), flagName))
}

// errTooManyQueues: the token created MaxQueuesPerToken queues already.
var errTooManyQueues = errors.New("too many queues")

// tokenQueues is the SET of the queues (topic names) a token created. The
// token appears only as its SHA-256, as in the token store.
func (p *Pool) tokenQueues(ns, token string) string {
	sum := sha256.Sum256([]byte(token))
	return p.prefix + ":rmqd:queues:" + ns + ":" + hex.EncodeToString(sum[:16])
}

// reserveQueue counts the queue (ns, q) against the token of qr when it
// does not exist yet, refusing it (errTooManyQueues) beyond max. A queue
// that exists costs one cached lookup.
func (p *Pool) reserveQueue(ctx context.Context, qr *queueReq, max int) error {
	if max <= 0 || qr.token == "" {
		return nil
	}
	name := names.TopicName(qr.ns, qr.q)
	if _, found, err := p.lookup(ctx, name); err != nil || found {
		return err
	}
	key := p.tokenQueues(qr.ns, qr.token)
	added, err := p.rdb.SAdd(ctx, key, name).Result()
	if err != nil || added == 0 {
		return err
	}
	n, err := p.rdb.SCard(ctx, key).Result()
	if err != nil {
		return err
	}
	if n > int64(max) {
		_ = p.rdb.SRem(context.WithoutCancel(ctx), key, name).Err()
		return errTooManyQueues
	}
	return nil
}

// queueAllowed is reserveQueue with its answer: false means answered.
func (s *Service) queueAllowed(w http.ResponseWriter, r *http.Request, qr *queueReq) bool {
	err := qr.pool.reserveQueue(r.Context(), qr, s.cfg.Quotas.MaxQueuesPerToken)
	switch {
	case errors.Is(err, errTooManyQueues):
		writeQuota(w, "too many queues created by this token", s.cfg.Quotas.MaxQueuesPerToken, "max-queues-per-token")
		return false
	case err != nil:
		s.writeInternal(w, r, err)
		return false
	}
	return true
}
