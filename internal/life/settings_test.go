package life_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/life"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

// The first consumer asking for settings stores them; later ones obey
// the stored ones (told that theirs differ); the Inspector's Store
// replaces them.
func TestSettingsResolve(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t, redistest.Shared(t))
	prefix := redistest.Prefix(t)
	first := life.Settings{Retention: time.Hour, Events: 1000}
	s, differs, err := life.Resolve(ctx, rdb, prefix, "t", first)
	require.NoError(t, err)
	assert.Equal(t, first, s)
	assert.False(t, differs)

	s, differs, err = life.Resolve(ctx, rdb, prefix, "t", life.Settings{Retention: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, first, s, "the stored ones win")
	assert.True(t, differs)

	s, differs, err = life.Resolve(ctx, rdb, prefix, "t", life.Settings{})
	require.NoError(t, err)
	assert.Equal(t, first, s)
	assert.False(t, differs, "asking for nothing differs from nothing")

	require.NoError(t, life.Store(ctx, rdb, prefix, "t", life.Settings{Events: 5}))
	s, found, err := life.Read(ctx, rdb, prefix, "t")
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, life.Settings{Events: 5}, s)

	_, found, err = life.Read(ctx, rdb, prefix, "other")
	require.NoError(t, err)
	assert.False(t, found)
}

func TestSettingsBounds(t *testing.T) {
	for _, bad := range []life.Settings{{Retention: -time.Second}, {Retention: 31 * 24 * time.Hour},
		{Retention: time.Microsecond}, {Events: -1}, {Events: life.MaxEvents + 1}} {
		assert.ErrorIs(t, bad.Validate(), life.ErrInvalidSettings, "%+v", bad)
	}
	for _, bad := range []string{"retention=x", "size=3", "retention"} {
		_, err := life.ParseSettings(bad)
		assert.ErrorIs(t, err, life.ErrInvalidSettings, bad)
	}
	s, err := life.ParseSettings(life.Settings{Retention: 90 * time.Second, Events: 7}.String())
	require.NoError(t, err)
	assert.Equal(t, life.Settings{Retention: 90 * time.Second, Events: 7}, s)
	require.Error(t, life.Store(context.Background(), nil, "p", "t", life.Settings{Events: -1}), "refused before any write")
}
