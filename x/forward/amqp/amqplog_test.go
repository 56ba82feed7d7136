package rmqamqp_test

import (
	"log"
	"os"

	amqp "github.com/rabbitmq/amqp091-go"
)

// RMQ_AMQP_LOG=1 shows amqp091's own log (connection and channel
// recovery) on stderr, for debugging a failing test.
func init() {
	if os.Getenv("RMQ_AMQP_LOG") != "" {
		amqp.SetLogger(log.New(os.Stderr, "amqp ", log.Lmicroseconds))
	}
}
