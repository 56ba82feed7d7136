package rmqnats_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/brokerserver"
	"github.com/rmq-go/rmq/internal/testkit/brokerserver/brokertest"
	"github.com/rmq-go/rmq/internal/testkit/forwardtest"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	rmqnats "github.com/rmq-go/rmq/x/forward/nats"
)

// TestMain runs the tests against a shared redis-server, or plays the
// forwarder that the kill test re-executes this binary as.
func TestMain(m *testing.M) {
	if forwardtest.IsWorker() {
		os.Exit(forwardtest.RunWorker(func(url string) (consumer.MessageListener, error) {
			_, js, err := connect(url)
			if err != nil {
				return nil, err
			}
			return rmqnats.Forwarder(js, subjectOf), nil
		}))
	}
	os.Exit(redistest.Main(m))
}

// subjectOf is the subject the tests forward a message to.
func subjectOf(m *consumer.Message) string { return "fw." + m.Topic }

// connect dials the way the package documentation asks: reconnects without
// end, an async publish timeout.
func connect(url string) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(10*time.Second))
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// broker is one test's nats-server and a connection to it.
type broker struct {
	srv *brokerserver.NATS
	nc  *nats.Conn
	js  jetstream.JetStream
}

func startBroker(t *testing.T) *broker {
	t.Helper()
	srv := brokertest.NATS(t)
	nc, js, err := connect(srv.URL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return &broker{srv: srv, nc: nc, js: js}
}

// stream creates a file-backed stream capturing "fw.<topic>" subjects.
func (b *broker) stream(t *testing.T, name string, subjects ...string) jetstream.Stream {
	t.Helper()
	s, err := b.js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: name, Subjects: subjects, Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute,
	})
	require.NoError(t, err)
	return s
}

// collector records what a core subscription receives, with the time.
type collector struct {
	mu  sync.Mutex
	got []forwardtest.Received
	sub *nats.Subscription
}

func (b *broker) collect(t *testing.T, subject string) *collector {
	t.Helper()
	c := &collector{}
	sub, err := b.nc.Subscribe(subject, func(m *nats.Msg) {
		r := received(m.Header, m.Data)
		c.mu.Lock()
		c.got = append(c.got, r)
		c.mu.Unlock()
	})
	require.NoError(t, err)
	require.NoError(t, sub.SetPendingLimits(-1, -1))
	require.NoError(t, b.nc.Flush())
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	c.sub = sub
	return c
}

func (c *collector) received() []forwardtest.Received {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]forwardtest.Received(nil), c.got...)
}

func (c *collector) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}

func received(h nats.Header, data []byte) forwardtest.Received {
	r := forwardtest.Received{At: time.Now(), DedupID: h.Get(jetstream.MsgIDHeader), Body: data, Headers: map[string]string{}}
	for k := range h {
		r.Headers[k] = h.Get(k)
	}
	return r
}

// storedMsgs reads every message of the stream back.
func storedMsgs(t *testing.T, s jetstream.Stream) []forwardtest.Received {
	t.Helper()
	ctx := context.Background()
	info, err := s.Info(ctx)
	require.NoError(t, err)
	var out []forwardtest.Received
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		require.NoError(t, err)
		r := received(m.Header, m.Data)
		r.At = m.Time
		out = append(out, r)
	}
	return out
}

func streamCount(t *testing.T, s jetstream.Stream) uint64 {
	t.Helper()
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	return info.State.Msgs
}

// closeForwarder closes fw when the test ends, after the RMQ client (whose
// cleanup was registered later, so runs first).
func closeForwarder(t *testing.T, fw consumer.MessageListener) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := fw.(rmqnats.Closer).Close(ctx); err != nil {
			t.Errorf("close forwarder: %v", err)
		}
	})
}
