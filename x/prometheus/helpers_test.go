package rmqprom_test

import (
	"context"
	"testing"

	"github.com/rmq-go/rmq/internal/testkit/redisserver"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/rmqtest"
	"github.com/rmq-go/rmq/topic"
)

// The core module's internal packages are importable here: Go's internal
// rule is by import path, and github.com/rmq-go/rmq/x/prometheus lies under
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
