package history

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Point is one minute of a topic's history as read back.
type Point struct {
	Start time.Time // the minute's start
	Minute
}

// HandlerP and LatenessP estimate a quantile of the point's histograms.
func (p *Point) HandlerP(q float64) time.Duration  { return Quantile(p.Handler, q) }
func (p *Point) LatenessP(q float64) time.Duration { return Quantile(p.Lateness, q) }

// readBatch bounds the HGETALLs of one pipeline.
const readBatch = 1000

// Read returns topic's minutes from the one holding since to the current
// one, a point for each (zero counts for a minute nobody wrote), oldest
// first: one HGETALL per minute, pipelined.
func Read(ctx context.Context, rdb redis.UniversalClient, prefix, topic string, since, now time.Time) ([]Point, error) {
	if since.IsZero() {
		since = now.Add(-time.Hour)
	}
	first := since.Truncate(time.Minute)
	last := now.Truncate(time.Minute)
	if first.After(last) {
		return nil, nil
	}
	n := int(last.Sub(first)/time.Minute) + 1
	out := make([]Point, n)
	for start := 0; start < n; start += readBatch {
		end := min(start+readBatch, n)
		pipe := rdb.Pipeline()
		cmds := make([]*redis.MapStringStringCmd, end-start)
		for i := start; i < end; i++ {
			out[i].Start = first.Add(time.Duration(i) * time.Minute)
			cmds[i-start] = pipe.HGetAll(ctx, Key(prefix, topic, out[i].Start))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, err
		}
		for i, c := range cmds {
			parse(c.Val(), &out[start+i].Minute)
		}
	}
	return out, nil
}

// parse reads a topic-minute hash into m; unknown fields are left alone
// (a later version may write more).
func parse(h map[string]string, m *Minute) {
	if len(h) == 0 {
		return
	}
	num := func(f string) int64 {
		n, _ := strconv.ParseInt(h[f], 10, 64)
		return n
	}
	for c, f := range counterFields {
		m.Counts[c] = num(f)
	}
	for j := range m.Handler {
		m.Handler[j] = num(handlerFields[j])
		m.Lateness[j] = num(lateFields[j])
	}
}

// Incr adds n to the count c of topic's current minute in Redis at once,
// with the key's expiry: for the one writer that keeps no recorder (an
// inspector's cancel), one round trip.
func Incr(ctx context.Context, rdb redis.UniversalClient, prefix, topic string, c Counter, n int64, retention time.Duration) error {
	minute := time.Now().Truncate(time.Minute)
	key := Key(prefix, topic, minute)
	pipe := rdb.Pipeline()
	pipe.HIncrBy(ctx, key, counterFields[c], n)
	pipe.ExpireAt(ctx, key, minute.Add(retention))
	_, err := pipe.Exec(ctx)
	return err
}
