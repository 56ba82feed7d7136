package luascripts_test

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/luascripts"
)

func TestSourceAndNames(t *testing.T) {
	names := luascripts.Names()
	require.Contains(t, names, "fetch")
	require.Contains(t, names, "sendbatch")
	require.NotContains(t, names, "lib")
	for _, n := range names {
		src, err := luascripts.Source(n)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(src, "-- "+n+".lua"), "%s starts with its header", n)
		require.Contains(t, src, "Returns:", n)
	}
	_, err := luascripts.Source("lib")
	require.NoError(t, err)
	_, err = luascripts.Source("nope")
	require.True(t, errors.Is(err, fs.ErrNotExist))
}
