package main

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/api"
)

// netOut is Redis's total_net_output_bytes.
func netOut(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "stats").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_net_output_bytes:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no total_net_output_bytes in INFO")
	return 0
}

// Listing a queue's schedules read every schedule of the pool, every
// tenant's body included, and filtered afterwards. Now only the queue's
// schedules are read: Redis sends next to nothing for a queue that has
// none while another namespace holds 20 MiB of schedule bodies, and the
// queue's own schedules are listed with theirs.
func TestBinaryListSchedulesReadsOnlyTheQueues(t *testing.T) {
	srv := redistest.Start(t, redisserver.Config{})
	rdb := redistest.Client(t, srv)
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + redistest.Prefix(t)})
	tokA, tokB := newTokenOn(t, p.admin, "nsA"), newTokenOn(t, p.admin, "nsB")
	body := strings.Repeat("b", 1<<20)
	for i := range 20 {
		a := do(t, "PUT", p.api+"/api/nsB/q1/schedule/s"+strconv.Itoa(i)+"?spec=@hourly&paused=true", body, "X-Token: "+tokB)
		require.Equal(t, http.StatusCreated, a.status, "%s", a)
	}
	a := do(t, "PUT", p.api+"/api/nsA/q1/schedule/mine?spec=@hourly", "small", "X-Token: "+tokA)
	require.Equal(t, http.StatusCreated, a.status, "%s", a)
	a = do(t, "PUT", p.api+"/api/nsA/q2/schedule/other?spec=@hourly", "q2's", "X-Token: "+tokA)
	require.Equal(t, http.StatusCreated, a.status, "%s", a)

	before := netOut(t, rdb)
	a = do(t, "GET", p.api+"/api/nsA/q3/schedules", "", "X-Token: "+tokA)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	require.JSONEq(t, `{"schedules":[]}`, string(a.body))
	a = do(t, "GET", p.api+"/api/nsA/q1/schedules", "", "X-Token: "+tokA)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	var got struct{ Schedules []api.ScheduleJSON }
	a.json(t, &got)
	require.Len(t, got.Schedules, 1)
	require.Equal(t, "mine", got.Schedules[0].Name)
	require.Equal(t, "small", got.Schedules[0].Data)
	sent := netOut(t, rdb) - before
	t.Logf("Redis sent %d bytes for the two listings", sent)
	require.Less(t, sent, int64(64<<10), "Redis sent %d bytes to list two queues' schedules", sent)

	a = do(t, "GET", p.api+"/api/nsB/q1/schedules", "", "X-Token: "+tokB)
	require.Equal(t, http.StatusOK, a.status)
	a.json(t, &got)
	require.Len(t, got.Schedules, 20)
}
