// Package forward runs rmqd's --forward: the queues whose jobs go to a
// NATS, AMQP or Kafka broker when due, their flags and their status.
package forward
