package rmqotel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"

	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/topic"
)

// The core module's internal packages are importable here: Go's internal
// rule is by import path, and github.com/rmq-go/rmq/x/otel lies under
// github.com/rmq-go/rmq.
func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }

// env is one test's Redis client, key prefix and log (internal/testkit/rmqtest,
// shared with the other integration module's tests).
type env struct{ *rmqtest.Env }

func newEnv(t *testing.T) *env { return &env{rmqtest.New(t)} }

func newEnvOn(t *testing.T, srv *redisserver.Server) *env { return &env{rmqtest.NewOn(t, srv)} }

func mustTopic(t *testing.T, name string, typ topic.Type, slotAmount int) topic.Topic {
	return rmqtest.MustTopic(t, name, typ, slotAmount)
}

func ctxT(t *testing.T) context.Context { return rmqtest.Ctx(t) }

// leaseDirect takes the lease of every due message in slot 0 of tp with the
// consumer's own fetch script, as a consumer that then died would.
func leaseDirect(t *testing.T, e *env, tp topic.Topic) []scripts.Fetched {
	t.Helper()
	k := keyspace.KeysFor(e.Prefix, tp, 0)
	keys, args := scripts.FetchCall{TimeBased: tp.Type().TimeBased(), N: 1, LeaseSec: 1, Window: 65,
		Groups: []scripts.FetchGroup{{Store: k.Store, Prepare: k.Prepare, Msg: k.Msg, Max: 1}}}.Args()
	vals, err := scripts.Fetch.Run(context.Background(), e.RDB, keys, args...).Slice()
	require.NoError(t, err)
	r, err := scripts.ParseFetchReply(vals)
	require.NoError(t, err)
	return r.Msgs
}
