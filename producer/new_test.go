package producer_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/slots"
	"github.com/rmq-go/rmq/topic"
)

// New refuses what it cannot work with, each with its error, before any
// command: a nil client, a nil option, a negative body size, a bad prefix.
func TestNewRefusesBadOptions(t *testing.T) {
	rdb := redistest.Client(t, redistest.Shared(t))
	for name, c := range map[string]struct {
		call func() (*producer.Producer, error)
		want error
	}{
		"nil client":   {func() (*producer.Producer, error) { return producer.New(nil) }, consumer.ErrInvalidOption},
		"nil option":   {func() (*producer.Producer, error) { return producer.New(rdb, nil) }, rmq.ErrInvalidOption},
		"negative":     {func() (*producer.Producer, error) { return producer.New(rdb, producer.WithMaxBodySize(-1)) }, rmq.ErrInvalidOption},
		"bad prefix":   {func() (*producer.Producer, error) { return producer.New(rdb, producer.WithPrefix("a{b}")) }, slots.ErrInvalidPrefix},
		"empty prefix": {func() (*producer.Producer, error) { return producer.New(rdb, producer.WithPrefix("")) }, slots.ErrInvalidPrefix},
	} {
		p, err := c.call()
		require.ErrorIs(t, err, c.want, name)
		require.Nil(t, p, name)
	}
}

// A producer made by New writes what a client's consumers read: under its
// prefix (and under the default prefix without WithPrefix, the client's
// default), and it refuses bodies over its WithMaxBodySize.
func TestNewSendsToClientConsumers(t *testing.T) {
	rdb := redistest.Client(t, redistest.Shared(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	quiet := rmq.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))

	prefix := redistest.Prefix(t)
	tp := topic.MustNew("standalone", topic.FixedTime, 2)
	p, err := producer.New(rdb, producer.WithPrefix(prefix), producer.WithMaxBodySize(8))
	require.NoError(t, err)
	require.Equal(t, prefix, p.Prefix())
	_, err = p.SendFixedTime(ctx, tp, []byte(strings.Repeat("x", 9)), time.Now())
	require.ErrorIs(t, err, producer.ErrBodyTooLarge)
	id, err := p.SendFixedTime(ctx, tp, []byte("hello"), time.Now())
	require.NoError(t, err)

	c, err := rmq.New(rdb, rmq.WithPrefix(prefix), quiet)
	require.NoError(t, err)
	got := make(chan string, 1)
	require.NoError(t, c.Register(tp, consumer.ListenerFunc(func(_ context.Context, m *consumer.Message) error {
		got <- m.ID + " " + string(m.Body)
		return nil
	})))
	require.NoError(t, c.Start(ctx))
	defer c.Close(ctx)
	select {
	case g := <-got:
		require.Equal(t, id+" hello", g)
	case <-ctx.Done():
		t.Fatal("the message of the standalone producer was not delivered")
	}

	def, err := producer.New(rdb)
	require.NoError(t, err)
	cdef, err := rmq.New(rdb, quiet)
	require.NoError(t, err)
	require.Equal(t, cdef.Producer().Prefix(), def.Prefix())
}
