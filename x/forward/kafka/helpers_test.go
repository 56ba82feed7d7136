package rmqkafka_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/forwardtest"
	"github.com/rmq-go/rmq/internal/testkit/procutil"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	rmqkafka "github.com/rmq-go/rmq/x/forward/kafka"
)

// TestMain runs the tests against a shared redis-server, or plays the
// forwarder that the kill test re-executes this binary as.
func TestMain(m *testing.M) {
	if forwardtest.IsWorker() {
		os.Exit(forwardtest.RunWorker(func(addr string) (consumer.MessageListener, error) {
			cl, err := newClient(addr)
			if err != nil {
				return nil, err
			}
			return rmqkafka.Forwarder(cl, topicOf), nil
		}))
	}
	os.Exit(redistest.Main(m))
}

// topicOf is the Kafka topic the tests forward a message to.
func topicOf(m *consumer.Message) string { return "fw-" + m.Topic }

// newClient is a producing client as the package documentation asks.
func newClient(addr string) (*kgo.Client, error) {
	return kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordDeliveryTimeout(time.Minute))
}

// cluster is an in-process kfake broker with a data directory, so it can
// be stopped and started again on the same port with its records.
type cluster struct {
	mu   sync.Mutex
	c    *kfake.Cluster
	port int
	dir  string
}

func (k *cluster) addr() string { return k.c.ListenAddrs()[0] }

func startCluster(t *testing.T, topics ...string) *cluster {
	t.Helper()
	port, err := procutil.FreePort()
	require.NoError(t, err)
	k := &cluster{port: port, dir: t.TempDir()}
	k.c, err = kfake.NewCluster(kfake.Ports(port), kfake.DataDir(k.dir), kfake.SeedTopics(4, topics...))
	require.NoError(t, err)
	t.Cleanup(k.stop)
	return k
}

func (k *cluster) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.c != nil {
		k.c.Close()
		k.c = nil
	}
}

func (k *cluster) restart(t *testing.T) {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	// The port may linger for a moment, and nothing tells when it is
	// free: the bind is retried.
	var err error
	forwardtest.Eventually(t, 5*time.Second, "kfake back on its port", func() bool {
		k.c, err = kfake.NewCluster(kfake.Ports(k.port), kfake.DataDir(k.dir))
		return err == nil
	})
}

// forwarder is rmqkafka.Forwarder on a client of its own, closed when the
// test ends after the RMQ client (whose cleanup is registered later).
func (k *cluster) forwarder(t *testing.T, opts ...rmqkafka.Option) consumer.MessageListener {
	t.Helper()
	cl, err := newClient(k.addr())
	require.NoError(t, err)
	fw := rmqkafka.Forwarder(cl, topicOf, opts...)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := fw.(rmqkafka.Closer).Close(ctx); err != nil {
			t.Errorf("close forwarder: %v", err)
		}
		cl.Close()
	})
	return fw
}

// consume reads topic from its start until it has n records (or, with
// n < 0, until nothing came for two seconds).
func (k *cluster) consume(t *testing.T, topic string, n int) []forwardtest.Received {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.addr()), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	var out []forwardtest.Received
	deadline := time.Now().Add(forwardtest.WaitLong)
	for (n < 0 || len(out) < n) && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		if n < 0 && len(fs.Records()) == 0 && ctx.Err() != nil {
			break
		}
		fs.EachRecord(func(r *kgo.Record) {
			got := forwardtest.Received{At: r.Timestamp, DedupID: string(r.Key), Body: r.Value, Headers: map[string]string{}}
			for _, h := range r.Headers {
				got.Headers[h.Key] = string(h.Value)
			}
			out = append(out, got)
		})
	}
	return out
}
