package scripts_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/scripts"
)

// sendbatch.lua writes a new id with options in its gathered path (no
// send_one): the envelope is byte for byte what env_encode (and the Go
// encoder) writes, options as given; a priority message with a not-before
// time still goes through send_one into the delayed set.
func TestSendBatchGathersNewIDsWithOptions(t *testing.T) {
	for _, typ := range []int{1, 2, 3} {
		t.Run(strconv.Itoa(typ), func(t *testing.T) {
			s := newSlot(t, typ)
			score := past()
			if typ == 1 {
				score = 0
			} else if typ == 2 {
				score = 500
			}
			opts := []scripts.Options{
				{},
				{MaxRetries: 3, HasMaxRetries: true, ExpiresAtMs: int64(past()) + 3_600_000},
				{TimeoutMs: 2500, Headers: map[string]string{"k": "v", "a": "b"}},
				{MaxRetries: 0, HasMaxRetries: true},
			}
			args := []any{"PUBLISH", typ + 4, len(opts)}
			for i, o := range opts {
				args = append(args, "id"+strconv.Itoa(i), strconv.FormatFloat(score, 'f', -1, 64), strconv.Itoa(100+i), scripts.EncodeOptions(o), "body"+strconv.Itoa(i))
			}
			res, err := scripts.SendBatch.Run(s.ctx, s.rdb, []string{s.k.Store, s.k.Prepare, s.k.Msg, s.k.Wake, s.k.Delayed}, args...).Int64Slice()
			require.NoError(t, err)
			require.Equal(t, []int64{1, 1, 1, 1}, res)
			for i, o := range opts {
				id := "id" + strconv.Itoa(i)
				raw, err := s.rdb.HGet(s.ctx, s.k.Msg, id).Bytes()
				require.NoError(t, err)
				e, err := scripts.DecodeEnvelope(raw)
				require.NoError(t, err)
				assert.Equal(t, o, e.Options, id)
				want := scripts.Envelope{Version: 2, Type: typ, FirstSentMs: e.FirstSentMs, Score: e.Score, OrigScore: e.Score, Nonce: float64(100 + i), Options: o, Body: []byte("body" + strconv.Itoa(i))}
				assert.Equal(t, scripts.EncodeEnvelope(want), raw, id)
				z, err := s.rdb.ZScore(s.ctx, s.k.Store, id).Result()
				require.NoError(t, err)
				assert.Equal(t, e.Score, z)
			}
			if typ != 2 {
				return
			}
			nbf := int64(past()) + 60_000
			require.EqualValues(t, 1, s.sendOpts("later", 600, scripts.Options{NotBeforeMs: nbf}, "b"))
			d, err := s.rdb.ZScore(s.ctx, s.k.Delayed, "later").Result()
			require.NoError(t, err, "a not-before time: the delayed set")
			assert.EqualValues(t, nbf, d)
		})
	}
}
