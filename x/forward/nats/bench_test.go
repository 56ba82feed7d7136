package rmqnats_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rmq-go/rmq/internal/testkit/brokerserver/brokertest"
	"github.com/rmq-go/rmq/internal/testkit/forwardtest"
	rmqnats "github.com/rmq-go/rmq/x/forward/nats"
)

// BenchmarkForward: messages/s forwarded from a backlog of 20,000 and the
// lateness from due time to PubAck of 5,000 messages coming due over five
// seconds, into a file-backed stream of a local nats-server:
//
//	go test -run '^$' -bench Forward -benchtime 1x ./x/forward/nats
func BenchmarkForward(b *testing.B) {
	srv := brokertest.NATS(b)
	nc, js, err := connect(srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	_, err = js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: "BENCH", Subjects: []string{"fw.>"}, Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute,
	})
	if err != nil {
		b.Fatal(err)
	}
	fw := rmqnats.Forwarder(js, subjectOf)
	defer fw.(rmqnats.Closer).Close(context.Background())
	forwardtest.Bench(b, fw, forwardtest.BenchConfig{
		Backlog: 20_000, Timed: 5_000, Over: 5 * time.Second, Concurrency: 256, BrokerPID: srv.Pid(),
	})
}
