package rmq_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// A nil option is refused with ErrInvalidOption by every constructor that
// takes options (New at once, NewInspector and NewSchedules at every
// call), not a panic.
func TestNilOptionIsInvalid(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	rdb := e.newRedis()

	c, err := rmq.New(rdb, rmq.WithPrefix(e.prefix), nil)
	require.ErrorIs(t, err, rmq.ErrInvalidOption)
	require.Nil(t, c)

	_, err = rmq.NewInspector(rdb, rmq.WithPrefix(e.prefix), nil).Topics(ctx)
	require.ErrorIs(t, err, rmq.ErrInvalidOption)

	_, err = rmq.NewSchedules(rdb, nil, rmq.WithPrefix(e.prefix)).List(ctx)
	require.ErrorIs(t, err, rmq.ErrInvalidOption)
}

// WithPrefix is an option of a client and of an inspector alike: one value
// configures both, and the inspector reads what the client's producer
// wrote under it.
func TestPrefixSharedByClientAndInspector(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	rdb := e.newRedis()
	prefix := rmq.WithPrefix(e.prefix)

	c, err := rmq.New(rdb, prefix)
	require.NoError(t, err)
	tp := mustTopic(t, "sharedprefix", topic.Priority, 2)
	_, err = c.Producer().SendPriority(ctx, tp, []byte("x"), 100, producer.WithKey("k"))
	require.NoError(t, err)

	opts := []rmq.InspectorOption{prefix}
	insp := rmq.NewInspector(rdb, opts...)
	require.Equal(t, e.prefix, insp.Prefix())
	st, err := insp.Stats(ctx, tp)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.Store)
}
