package main

import (
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/params"
)

// peakRSS is VmHWM of pid in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// One bulk publish of 64 jobs of 1 MiB took rmqd from 24 to 252 MB (the
// body read by doubling, each job copied out of it, then encoded). The
// jobs are slices of a body read into one buffer now: the peak stays
// within about twice the body beyond the start.
func TestBinaryBulkPublishMemory(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc")
	}
	srv := redistest.Shared(t)
	p := startRmqd(t, "redis://"+srv.Addr()+"/0", []string{"RMQD_PREFIX=" + redistest.Prefix(t), "RMQD_ACCESS_LOG=false"})
	tok := newTokenOn(t, p.admin, "ns")
	elems := make([]string, params.MaxBulkJobs)
	for i := range elems {
		elems[i] = strings.Repeat("b", params.MaxJobSize-2) // a JSON string of 1 MiB with its quotes
	}
	body, err := json.Marshal(elems)
	require.NoError(t, err)
	start := peakRSS(t, p.cmd.Process.Pid)
	a := do(t, "PUT", p.api+"/api/ns/q/bulk", string(body), "X-Token: "+tok)
	require.Equal(t, http.StatusCreated, a.status, "%s", a.body[:min(len(a.body), 200)])
	grew := peakRSS(t, p.cmd.Process.Pid) - start
	t.Logf("peak RSS grew %d MB for a %d MB bulk", grew>>20, len(body)>>20)
	require.Less(t, grew, int64(2*len(body)), "peak RSS grew %d MB", grew>>20)
	require.JSONEq(t, `{"namespace":"ns","queue":"q","size":64}`, string(do(t, "GET", p.api+"/api/ns/q/size", "").body))
}
