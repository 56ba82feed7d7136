package rmq_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// A consumer.Option is a sealed interface: a nil one is still refused by
// Register with ErrInvalidOption, and options kept in a slice apply as
// given (the topic registers).
func TestRegisterNilConsumerOption(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	tp := mustTopic(t, "sealednil", topic.FixedTime, 2)
	err := c.Register(tp, newRecorder(nil), consumer.WithConcurrency(2), nil)
	require.ErrorIs(t, err, rmq.ErrInvalidOption)
	require.ErrorIs(t, err, consumer.ErrInvalidOption)

	opts := []consumer.Option{consumer.WithConcurrency(2), consumer.WithMaxRetries(3)}
	require.NoError(t, c.Register(tp, newRecorder(nil), opts...))
}
