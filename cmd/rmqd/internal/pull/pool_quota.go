package pull

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
)

// scheduleIndex is the SET of the library names of the schedules a
// namespace made through rmqd: it counts them per namespace without
// reading the schedules (a queue's name may be hashed into its topic's,
// so the namespace cannot be read back from a schedule's name).
func (p *Pool) scheduleIndex(ns string) string { return p.prefix + ":rmqd:schedules:" + ns }

// ReserveSchedule adds name to ns's schedules before it is set, refusing
// it beyond max. added says whether name is new there (to be dropped again
// by unreserveSchedule when the set fails). Names whose schedule is gone
// (removed by another program) are dropped from the count first.
func (p *Pool) ReserveSchedule(ctx context.Context, ns, name string, max int) (added bool, err error) {
	if max <= 0 {
		return false, nil
	}
	key := p.scheduleIndex(ns)
	n, err := p.Rdb.SAdd(ctx, key, name).Result()
	if err != nil || n == 0 {
		return false, err
	}
	count, err := p.Rdb.SCard(ctx, key).Result()
	if err != nil {
		p.UnreserveSchedule(ns, name)
		return false, err
	}
	if count <= int64(max) {
		return true, nil
	}
	members, err := p.Rdb.SMembers(ctx, key).Result()
	if err == nil {
		var exist []bool
		if exist, err = p.Client.Schedules().Exist(ctx, members...); err == nil {
			var gone []any
			for i, m := range members {
				if !exist[i] && m != name {
					gone = append(gone, m)
				}
			}
			if len(gone) > 0 {
				err = p.Rdb.SRem(ctx, key, gone...).Err()
			}
			count -= int64(len(gone))
		}
	}
	if err != nil || count > int64(max) {
		p.UnreserveSchedule(ns, name)
		if err == nil {
			err = ErrTooManySchedules
		}
		return false, err
	}
	return true, nil
}

// UnreserveSchedule drops name from ns's schedules (a failed set, a
// removal). It runs on its own context: the request's may be gone.
func (p *Pool) UnreserveSchedule(ns, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.Rdb.SRem(ctx, p.scheduleIndex(ns), name).Err()
}

// tokenQueues is the SET of the queues (topic names) a token created. The
// token appears only as its SHA-256, as in the token store.
func (p *Pool) tokenQueues(ns, token string) string {
	sum := sha256.Sum256([]byte(token))
	return p.prefix + ":rmqd:queues:" + ns + ":" + hex.EncodeToString(sum[:16])
}

// ReserveQueue counts the queue (ns, q) against token when it
// does not exist yet, refusing it (errTooManyQueues) beyond max. A queue
// that exists costs one cached lookup.
func (p *Pool) ReserveQueue(ctx context.Context, ns, q, token string, max int) error {
	if max <= 0 || token == "" {
		return nil
	}
	name := names.TopicName(ns, q)
	if _, found, err := p.lookup(ctx, name); err != nil || found {
		return err
	}
	key := p.tokenQueues(ns, token)
	added, err := p.Rdb.SAdd(ctx, key, name).Result()
	if err != nil || added == 0 {
		return err
	}
	n, err := p.Rdb.SCard(ctx, key).Result()
	if err != nil {
		return err
	}
	if n > int64(max) {
		_ = p.Rdb.SRem(context.WithoutCancel(ctx), key, name).Err()
		return ErrTooManyQueues
	}
	return nil
}

// ErrTooManySchedules: the namespace holds MaxSchedules already.
var ErrTooManySchedules = errors.New("too many schedules")

// ErrTooManyQueues: the token created MaxQueuesPerToken queues already.
var ErrTooManyQueues = errors.New("too many queues")
