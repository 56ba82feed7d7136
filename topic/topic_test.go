package topic

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewValidates(t *testing.T) {
	for _, n := range []int{1, 2, 16, 1024, 16384} {
		tp, err := New("ok", FixedTime, n)
		require.NoError(t, err, n)
		assert.Equal(t, n, tp.SlotAmount())
	}
	for _, n := range []int{0, -1, 3, 6, 100, 16385, 32768} {
		_, err := New("ok", FixedTime, n)
		assert.ErrorIs(t, err, ErrInvalidSlotAmount, n)
	}
	for _, name := range []string{"", "a:b", "a{b}", "a b", "ä", strings.Repeat("x", 129)} {
		_, err := New(name, Priority, 1)
		assert.ErrorIs(t, err, ErrInvalidName, "%q", name)
	}
	_, err := New(strings.Repeat("x", 128), Priority, 1)
	assert.NoError(t, err)
	_, err = New("ok", Type(0), 1)
	assert.ErrorIs(t, err, ErrInvalidType)
	_, err = New("ok", Type(4), 1)
	assert.ErrorIs(t, err, ErrInvalidType)
	assert.Panics(t, func() { MustNew("a:b", Priority, 1) })
	assert.True(t, Topic{}.IsZero())
}

func TestDefinitionRoundTrip(t *testing.T) {
	for _, typ := range []Type{RangeMerge, Priority, FixedTime} {
		tp := MustNew("orders.v1", typ, 64)
		back, err := ParseDefinition(tp.Name(), tp.Definition())
		require.NoError(t, err)
		assert.Equal(t, tp, back)
		parsed, err := ParseType(typ.String())
		require.NoError(t, err)
		assert.Equal(t, typ, parsed)
	}
	assert.Equal(t, "fixedtime:16", MustNew("x", FixedTime, 16).Definition())
	for _, bad := range []string{"", "fixedtime", "fixedtime:x", "nope:16", "fixedtime:3"} {
		_, err := ParseDefinition("x", bad)
		assert.Error(t, err, bad)
	}
	assert.True(t, FixedTime.TimeBased())
	assert.True(t, RangeMerge.TimeBased())
	assert.False(t, Priority.TimeBased())
}
