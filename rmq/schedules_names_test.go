package rmq_test

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// ListPrefix, Names and Exist answer for the schedules of a name prefix
// only (a glob character in the prefix matches itself), as List filtered would.
func TestScheduleListPrefix(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		tp := mustTopic(t, "jobs", topic.FixedTime, 2)
		s := e.client().Schedules()
		for _, name := range []string{"a.x", "a.y", "ab.z", "b.x"} {
			require.NoError(t, s.Set(ctx, rmq.Schedule{Name: name, Spec: "@hourly", Topic: tp, Body: []byte("body of " + name), Paused: true}))
		}
		infos, err := s.ListPrefix(ctx, "a.")
		require.NoError(t, err)
		var got []string
		for _, info := range infos {
			got = append(got, info.Name+"="+string(info.Body))
		}
		assert.Equal(t, []string{"a.x=body of a.x", "a.y=body of a.y"}, got)
		names, err := s.Names(ctx, "a*")
		require.NoError(t, err)
		assert.Empty(t, names, "a glob character matches itself only")
		names, err = s.Names(ctx, "")
		require.NoError(t, err)
		sort.Strings(names)
		assert.Equal(t, []string{"a.x", "a.y", "ab.z", "b.x"}, names)
		exist, err := s.Exist(ctx, "a.x", "nope", "b.x")
		require.NoError(t, err)
		assert.Equal(t, []bool{true, false, true}, exist)
		none, err := s.ListPrefix(ctx, "c.")
		require.NoError(t, err)
		assert.Empty(t, none)
	})
}
