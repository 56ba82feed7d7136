package rmqkafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/rmq-go/rmq/internal/testkit/forwardtest"
	rmqkafka "github.com/rmq-go/rmq/x/forward/kafka"
)

// BenchmarkForward: messages/s forwarded from a backlog of 20,000 and the
// lateness from due time to produce acknowledgement of 5,000 messages
// coming due over five seconds, into kfake (in this process: its CPU counts
// as the client's; not a Kafka broker's figures):
//
//	go test -run '^$' -bench Forward -benchtime 1x ./x/forward/kafka
func BenchmarkForward(b *testing.B) {
	kc, err := kfake.NewCluster(kfake.SeedTopics(4, "fw-"+forwardtest.BenchBacklogTopic, "fw-"+forwardtest.BenchTimedTopic))
	if err != nil {
		b.Fatal(err)
	}
	defer kc.Close()
	cl, err := newClient(kc.ListenAddrs()[0])
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	fw := rmqkafka.Forwarder(cl, topicOf)
	defer fw.(rmqkafka.Closer).Close(context.Background())
	forwardtest.Bench(b, fw, forwardtest.BenchConfig{
		Backlog: 20_000, Timed: 5_000, Over: 5 * time.Second, Concurrency: 256,
	})
}
