package redisaddr

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	s, c, err := Parse("127.0.0.1:6379", false)
	require.NoError(t, err)
	require.Nil(t, c)
	require.Equal(t, "127.0.0.1:6379", s.Addr)

	s, _, err = Parse("redis://u:pw@127.0.0.1:7000/2", false)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:7000", s.Addr)
	require.Equal(t, 2, s.DB)
	require.Equal(t, "pw", s.Password)

	_, c, err = Parse("127.0.0.1:7000, redis://127.0.0.1:7001,127.0.0.1:7002", false)
	require.NoError(t, err)
	require.Equal(t, []string{"127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"}, c.Addrs)

	_, c, err = Parse("127.0.0.1:7000", true)
	require.NoError(t, err)
	require.Equal(t, []string{"127.0.0.1:7000"}, c.Addrs)

	for _, bad := range []string{"localhost", "http://h:1", "redis://u:se cret@h:1", "h:1,nohost"} {
		_, _, err := Parse(bad, false)
		require.ErrorIs(t, err, ErrInvalid, bad)
		var pe *PartError
		require.True(t, errors.As(err, &pe), bad)
		require.NotContains(t, err.Error(), "se cret")
	}
}
