package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/rmq"
)

func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }

// One worker takes the jobs highest priority first; the broken job's
// retries come after every fresh job, and after the last one it is dead
// (and deleted by the example, leaving no dead message behind).
func TestPriorityJobs(t *testing.T) {
	rdb := redistest.Client(t, redistest.Shared(t))
	prefix := redistest.Prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, rdb, prefix, &out))

	var order []string
	for _, m := range regexp.MustCompile(`#\d+ priority +\d+  (\S+) +attempt (\d) (done|FAILED)`).FindAllStringSubmatch(out.String(), -1) {
		order = append(order, m[1]+"#"+m[2]+" "+m[3])
	}
	assert.Equal(t, []string{
		"send-password-reset-email#1 done",
		"charge-card-order-1002#1 FAILED",
		"refund-order-0999#1 done",
		"generate-monthly-invoices#1 done",
		"rebuild-search-index#1 done",
		"charge-card-order-1002#2 FAILED",
		"charge-card-order-1002#3 FAILED",
	}, order, out.String())
	assert.Contains(t, out.String(), `dead: charge-card-order-1002 after 3 attempts, last error "payment gateway unavailable"`)
	assert.Equal(t, 1, strings.Count(out.String(), "dead:"))
	st, err := rmq.NewInspector(rdb, rmq.WithPrefix(prefix)).Stats(ctx, jobs)
	require.NoError(t, err)
	assert.Equal(t, [3]int64{0, 0, 0}, [3]int64{st.Store, st.Prepare, st.Dead}, "nothing left: the example deletes its dead job")
}
