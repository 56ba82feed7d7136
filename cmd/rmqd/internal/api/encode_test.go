package api

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/encode"
)

// The hand-written encoders give encoding/json's bytes.
func TestEncodersMatchEncodingJSON(t *testing.T) {
	strs := []string{"", "plain", "01M85D3EW1G8DMMJKS84000000", `q"uo\\te`, "ctl\x00\x01\x1f\t\n\r\b\f", "<a&b>",
		"\u2028\u2029", "héllo 日本", "bad\xffutf8\xc3", "\x7f", "end\\"}
	for _, s := range strs {
		want, err := json.Marshal(s)
		require.NoError(t, err)
		require.Equal(t, string(want), string(encode.AppendJSONString(nil, s)), "%q", s)

		want, err = json.Marshal(publishedBody{Msg: "published", JobID: s})
		require.NoError(t, err)
		require.Equal(t, string(want), string(encode.PublishedJSON(s)))
	}
	jobs := []encode.JobBody{
		{Msg: "new job", Namespace: "ns", Queue: "q", JobID: "01M85D3EW1G8DMMJKS84000000", Data: []byte("hello"), TTL: 86396, ElapsedMS: 4308},
		{Namespace: "ns", Queue: "q", JobID: "x", Data: nil},
		{Msg: "new job", Namespace: "n", Queue: "q", JobID: "y", Data: []byte{}, RemainTries: 3, TTL: -1, ElapsedMS: 1 << 40,
			Attributes: map[string]string{"b": "2", "a": "<1>", "z\"": "\xff"}},
		{Namespace: "n", Queue: "q", JobID: "z", Data: []byte{0, 1, 2, 250, 255}, Attributes: map[string]string{}},
	}
	for i := range jobs {
		want, err := json.Marshal(jobs[i])
		require.NoError(t, err)
		require.Equal(t, string(want), string(encode.JobsJSON(jobs[i:i+1], false)))
	}
	want, err := json.Marshal(jobs)
	require.NoError(t, err)
	require.Equal(t, string(want), string(encode.JobsJSON(jobs, true)))
}
