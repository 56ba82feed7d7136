package life_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/life"
	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }

// logs are the event logs of a topic of n slots.
func logs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = keyspace.LifeKeysFor(prefix, "ev", i).Events
	}
	return out
}

// record appends an event as lifelib.lua's life_event does.
func record(t *testing.T, rdb redis.UniversalClient, stream, typ, id string, attempt int) {
	t.Helper()
	require.NoError(t, rdb.XAdd(context.Background(), &redis.XAddArgs{Stream: stream,
		Values: []any{"t", typ, "id", id, "a", attempt}}).Err())
}

// follow ranges over Follow on a goroutine of the test, handing each event
// over; stop ends it and waits for it.
func follow(t *testing.T, rdb redis.UniversalClient, streams []string, after string) (<-chan life.Event, func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan life.Event)
	done := make(chan error, 1)
	go func() {
		for ev, err := range life.Follow(ctx, rdb, streams, after) {
			if err != nil {
				if errors.Is(err, context.Canceled) && ctx.Err() != nil {
					err = nil // the follow's end: stop cancelled it
				}
				done <- err
				return
			}
			select {
			case ch <- ev:
			case <-ctx.Done():
			}
		}
		done <- nil
	}()
	stop := sync.OnceValue(func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			return errors.New("Follow did not end")
		}
	})
	t.Cleanup(func() { _ = stop() })
	return ch, stop
}

func next(t *testing.T, ch <-chan life.Event) life.Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
		return life.Event{}
	}
}

// From "0" every kept event comes once, each slot's in order; resuming
// after an event's cursor yields exactly the ones after it, whichever slot
// they are in.
func testFollowResumes(t *testing.T, rdb redis.UniversalClient, prefix string) {
	streams := logs(prefix, 4)
	for i := range 3 {
		for s, st := range streams {
			record(t, rdb, st, "sent", fmt.Sprintf("s%d-m%d", s, i), i)
		}
	}
	ch, stop := follow(t, rdb, streams, "0")
	got := map[string]life.Event{}
	perSlot := map[string][]string{}
	var third life.Event
	for i := range 12 {
		ev := next(t, ch)
		if i == 2 {
			third = ev
		}
		got[ev.MessageID] = ev
		slot, _, _ := strings.Cut(ev.MessageID, "-")
		perSlot[slot] = append(perSlot[slot], ev.MessageID)
		assert.Equal(t, "sent", ev.Type)
		assert.WithinDuration(t, time.Now(), ev.Time, time.Minute)
	}
	require.Len(t, got, 12, "each event once")
	for s, ids := range perSlot {
		assert.Equal(t, []string{s + "-m0", s + "-m1", s + "-m2"}, ids, "a slot's events in order")
	}
	require.NoError(t, stop())

	// After the third: the nine others, and then a new one.
	ch, stop = follow(t, rdb, streams, third.Cursor)
	again := map[string]bool{}
	for range 9 {
		ev := next(t, ch)
		again[ev.MessageID] = true
		assert.NotEqual(t, third.MessageID, ev.MessageID)
	}
	assert.Len(t, again, 9)
	record(t, rdb, streams[2], "completed", "fresh", 1)
	ev := next(t, ch)
	assert.Equal(t, "fresh", ev.MessageID)
	assert.Equal(t, "completed", ev.Type)
	assert.Equal(t, 1, ev.Attempt)
	require.NoError(t, stop())
}

func TestFollowResumes(t *testing.T) {
	testFollowResumes(t, redistest.Client(t, redistest.Shared(t)), redistest.Prefix(t))
}

func TestFollowResumesOnACluster(t *testing.T) {
	testFollowResumes(t, redistest.ClusterClient(t, redistest.SharedCluster(t)), redistest.Prefix(t))
}

// "" yields only events recorded after the follow began.
func TestFollowFromNow(t *testing.T) {
	rdb := redistest.Client(t, redistest.Shared(t))
	streams := logs(redistest.Prefix(t), 2)
	record(t, rdb, streams[0], "sent", "old", 0)
	ch, stop := follow(t, rdb, streams, "")
	// The follow resolves "now" when it starts reading: record until an
	// event arrives; the first must be a new one.
	var ev life.Event
	for n := 0; ; n++ {
		record(t, rdb, streams[n%2], "sent", fmt.Sprintf("new%d", n), 0)
		select {
		case ev = <-ch:
		case <-time.After(50 * time.Millisecond):
			continue
		}
		break
	}
	assert.True(t, strings.HasPrefix(ev.MessageID, "new"), ev.MessageID)
	require.NoError(t, stop())
}

// A bad cursor is an error, nothing read.
func TestFollowRefusesBadCursors(t *testing.T) {
	rdb := redistest.Client(t, redistest.Shared(t))
	streams := logs(redistest.Prefix(t), 2)
	for _, bad := range []string{"x", "e1 2=1-0", "e1 0=abc", "e1 0=1-0 0=2-0", "e2"} {
		for _, err := range life.Follow(context.Background(), rdb, streams, bad) {
			assert.ErrorIs(t, err, life.ErrInvalidCursor, bad)
			break
		}
	}
}

// A follower blocked in Redis ends at once when its context does.
func TestFollowEndsWithItsContext(t *testing.T) {
	rdb := redistest.Client(t, redistest.Shared(t))
	streams := logs(redistest.Prefix(t), 3)
	ch, stop := follow(t, rdb, streams, "0")
	record(t, rdb, streams[1], "sent", "a", 0)
	next(t, ch) // the reader is in its blocking read now or about to be
	require.NoError(t, stop())
}

// Redis killed (kill -9) and restarted from its AOF: the follow goes on
// from where it was, nothing skipped or repeated.
func TestFollowSurvivesARedisRestart(t *testing.T) {
	srv := redistest.Start(t, redisserver.Config{AppendOnly: true, AppendFsync: "always"})
	rdb := redistest.Client(t, srv)
	streams := logs(redistest.Prefix(t), 2)
	record(t, rdb, streams[0], "sent", "before", 0)
	ch, stop := follow(t, rdb, streams, "0")
	assert.Equal(t, "before", next(t, ch).MessageID)

	require.NoError(t, srv.Kill())
	require.NoError(t, srv.Restart(context.Background()))
	record(t, rdb, streams[1], "sent", "after", 0)
	record(t, rdb, streams[0], "completed", "before", 1)
	seen := map[string]bool{}
	for range 2 {
		ev := next(t, ch)
		seen[ev.Type+" "+ev.MessageID] = true
	}
	assert.Equal(t, map[string]bool{"sent after": true, "completed before": true}, seen)
	require.NoError(t, stop())
}
