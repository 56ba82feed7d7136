package dashboard_test

import (
	"context"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/dashboard"
	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/testkit/zkserver/zktest"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

var zkSlotRow = regexp.MustCompile(`<tr data-slot="(\d+)"><td class="n">\d+</td><td class="owner">(?:<code>([^<]*)</code>|<span[^>]*>none</span>)</td><td class="n epoch">([^<]*)</td></tr>`)

func TestZooKeeperPageShowsOwnersAndEpochs(t *testing.T) {
	srv := zktest.Start(t)
	e := newEnv(t, dashboard.WithZooKeeper([]string{srv.Addr()}))
	tp := e.topic("zkorders", topic.FixedTime, 4)
	idle := e.topic("zkidle", topic.FixedTime, 2)
	e.send(idle, "k", "stored, consumed by nobody")

	c, err := rmq.New(e.rdb, rmq.WithPrefix(e.prefix), rmq.WithLogger(slog.New(slog.DiscardHandler)),
		rmq.WithZooKeeper([]string{srv.Addr()}, rmq.ZKSessionTimeout(2*time.Second)))
	require.NoError(t, err)
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(context.Context, *consumer.Message) error { return nil })))
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() { closeClient(t, c) })

	// Every slot owned, and every owner's term started (its epoch in Redis).
	var owned map[int]int64
	e.waitFor("all slots owned with their epochs in Redis", func() bool {
		owned = c.OwnedSlots(tp.Name())
		if len(owned) != tp.SlotAmount() {
			return false
		}
		for s, ep := range owned {
			v, err := e.rdb.Get(context.Background(), keyspace.EpochKey(e.prefix, tp.Name(), s)).Int64()
			if err != nil || v != ep {
				return false
			}
		}
		return true
	})
	member := c.FleetMember()
	require.NotEmpty(t, member)

	assert.Contains(t, e.get(""), `href="zookeeper"`, "the overview links the page")
	page := e.get("zookeeper")
	assert.Contains(t, page, `<tr data-member="`+member+`">`)

	sec := section(t, page, "zk-"+tp.Name())
	assert.Contains(t, sec, "4 of 4 slots owned")
	rows := zkSlotRow.FindAllStringSubmatch(sec, -1)
	require.Len(t, rows, tp.SlotAmount(), sec)
	for s, m := range rows {
		require.Equal(t, strconv.Itoa(s), m[1])
		assert.Equal(t, member, m[2], "owner of slot %d", s)
		require.NotZero(t, owned[s])
		assert.Equal(t, strconv.FormatInt(owned[s], 10), m[3], "epoch of slot %d", s)
	}
	assert.Contains(t, section(t, page, "zk-"+idle.Name()), "not coordinated in this fleet")

	// A wrong root: the fleet is not there, the page says so.
	e2 := newEnv(t, dashboard.WithZooKeeper([]string{srv.Addr()}, dashboard.ZKRoot("/elsewhere")))
	assert.Contains(t, e2.get("zookeeper"), "No worker is registered under this root.")
}

func TestZooKeeperPageAbsentWithoutOption(t *testing.T) {
	e := newEnv(t)
	e.send(e.topic("zkplain", topic.FixedTime, 2), "k", "x")
	overview := e.get("")
	assert.NotContains(t, overview, `href="zookeeper"`)
	assert.Contains(t, overview, "dashboard.WithZooKeeper")
	code, _, _ := e.do(http.MethodGet, "zookeeper", nil, nil)
	assert.Equal(t, http.StatusNotFound, code)
}

func TestZooKeeperOptionChecked(t *testing.T) {
	e := newEnv(t, dashboard.WithZooKeeper([]string{"127.0.0.1:1"}, dashboard.ZKRoot("relative")))
	code, _, body := e.do(http.MethodGet, "zookeeper", nil, nil)
	assert.Equal(t, http.StatusInternalServerError, code)
	assert.Contains(t, body, "relative")
}

// section returns the part of a page from the element with this id to the
// end of its section.
func section(t *testing.T, page, id string) string {
	t.Helper()
	i := strings.Index(page, `id="`+id+`"`)
	require.GreaterOrEqual(t, i, 0, "no section %s", id)
	rest := page[i:]
	if j := strings.Index(rest, "</section>"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

func TestZooKeeperUnreachableAnswers500(t *testing.T) {
	// Nothing listens on port 1: the page answers at once and says why.
	e := newEnv(t, dashboard.WithZooKeeper([]string{"127.0.0.1:1"}))
	start := time.Now()
	code, _, body := e.do(http.MethodGet, "zookeeper", nil, nil)
	assert.Equal(t, http.StatusInternalServerError, code)
	assert.Contains(t, body, "could not connect")
	assert.Less(t, time.Since(start), 10*time.Second)
}
