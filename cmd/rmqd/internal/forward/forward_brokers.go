package forward

// forward_brokers.go connects a forward to its broker the way each
// forwarder's documentation asks (x/forward/*/doc.go): reconnects without
// end, a bound on a publish that the broker never answers.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/rmq-go/rmq/consumer"
	rmqamqp "github.com/rmq-go/rmq/x/forward/amqp"
	rmqkafka "github.com/rmq-go/rmq/x/forward/kafka"
	rmqnats "github.com/rmq-go/rmq/x/forward/nats"
)

// Broker client settings.
const (
	// reconnectWait is the pause between two reconnects (NATS, AMQP).
	reconnectWait = time.Second
	// natsAckTimeout fails a JetStream publish whose PubAck never comes
	// (lost with a connection), so it does not hold a window slot until
	// shutdown; the forward itself gives up after 5 s and is retried.
	natsAckTimeout = 10 * time.Second
	// kafkaDeliveryTimeout fails a record the cluster cannot take, for
	// the same reason.
	kafkaDeliveryTimeout = time.Minute
	// clientName is how rmqd names itself to the brokers.
	clientName = "rmqd"
)

// openNATS connects to nats://[user:pass@]host:port and publishes to the
// subject through JetStream, which must have a stream capturing it.
func openNATS(ctx context.Context, spec Spec, log *slog.Logger) (broker, error) {
	nc, err := nats.Connect(spec.Dial, nats.Name(clientName),
		nats.MaxReconnects(-1), nats.ReconnectWait(reconnectWait),
		nats.DisconnectErrHandler(func(c *nats.Conn, err error) {
			if err != nil && !c.IsClosed() {
				log.Warn("rmqd: NATS connection lost; reconnecting", "err", err)
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) { log.Info("rmqd: NATS connection back") }))
	if err != nil {
		return broker{}, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(natsAckTimeout))
	if err != nil {
		nc.Close()
		return broker{}, err
	}
	if err := checkStream(ctx, js, spec.Subject); err != nil {
		nc.Close()
		return broker{}, err
	}
	subject := spec.Subject
	fw := rmqnats.Forwarder(js, func(*consumer.Message) string { return subject })
	return broker{fw: fw, closeFw: fw.(rmqnats.Closer).Close, closeConn: nc.Close}, nil
}

// checkStream finds the stream that captures subject.
func checkStream(ctx context.Context, js jetstream.JetStream, subject string) error {
	_, err := js.StreamNameBySubject(ctx, subject)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("no JetStream stream captures subject %q", subject)
	}
	if err != nil {
		return fmt.Errorf("JetStream: look up the stream of subject %q: %w", subject, err)
	}
	return nil
}

// openAMQP connects to the AMQP URL with recovery that does not give up,
// and publishes to the exchange with the routing key. The forwarder checks
// that the exchange exists.
func openAMQP(ctx context.Context, spec Spec) (broker, error) {
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(clientName)
	conn, err := amqp.DialConfig(spec.Dial, amqp.Config{Properties: props, Recovery: &amqp.Recovery{
		ReconnectionConfig: &amqp.ReconnectionConfig{MaxRetryCount: math.MaxInt32, RetryInterval: reconnectWait},
		ConnectionRecovery: &amqp.DefaultConnectionRecovery{},
	}})
	if err != nil {
		return broker{}, err
	}
	key := spec.RoutingKey
	fw, err := rmqamqp.Forwarder(conn, spec.Exchange, func(*consumer.Message) string { return key })
	if err != nil {
		_ = conn.Close()
		return broker{}, err
	}
	return broker{fw: fw, closeFw: fw.(rmqamqp.Closer).Close, closeConn: func() { _ = conn.Close() }}, nil
}

// openKafka makes a producing client of the seed brokers and checks that
// one answers and has the topic (the client does not create topics).
func openKafka(ctx context.Context, spec Spec) (broker, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(spec.Brokers...), kgo.ClientID(clientName),
		kgo.RecordDeliveryTimeout(kafkaDeliveryTimeout))
	if err != nil {
		return broker{}, err
	}
	if err := cl.Ping(ctx); err != nil {
		cl.Close()
		return broker{}, err
	}
	if err := checkKafkaTopic(ctx, cl, spec.Subject); err != nil {
		cl.Close()
		return broker{}, err
	}
	topic := spec.Subject
	fw := rmqkafka.Forwarder(cl, func(*consumer.Message) string { return topic })
	return broker{fw: fw, closeFw: fw.(rmqkafka.Closer).Close, closeConn: cl.Close}, nil
}

// checkKafkaTopic asks the cluster for the topic's metadata without
// creating it.
func checkKafkaTopic(ctx context.Context, cl *kgo.Client, topic string) error {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); errors.Is(err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("no topic %q on the Kafka cluster", topic)
		} else if err != nil {
			return fmt.Errorf("topic %q: %w", topic, err)
		}
	}
	return nil
}
