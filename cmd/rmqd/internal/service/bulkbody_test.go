package service

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// splitArray gives what json.Unmarshal into []json.RawMessage gave, as
// slices of the body.
func TestSplitArrayAsUnmarshal(t *testing.T) {
	for _, in := range []string{
		`[]`, ` [ ] `, `[1]`, `[ "a,]" , {"x":[1,{"y":"}"}]} ,null, "\"q\\\\" ,[[],[]]]`,
		"[\n\t{\"order\":42}\r\n]",
	} {
		var want []json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(in), &want), in)
		got, err := SplitArray([]byte(in))
		require.NoError(t, err, in)
		require.Len(t, got, len(want), in)
		for i := range want {
			require.Equal(t, string(want[i]), string(got[i]), in)
		}
	}
	for _, bad := range []string{``, `null`, `{}`, `"x"`, `[1,]`, `[1`, `1 [2]`} {
		_, err := SplitArray([]byte(bad))
		require.Error(t, err, bad)
	}
}
