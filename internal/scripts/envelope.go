package scripts

import (
	"encoding/binary"
	"errors"
	"math"
)

// Envelope is what the msg and deadmsg hashes hold for one message. The
// layout is written by lib.lua; this is its Go reader.
type Envelope struct {
	Type        int     // 1 range-merge, 2 priority, 3 fixed-time
	Failures    int     // failed attempts so far
	FirstSentMs float64 // Redis time of the first send (ms)
	Score       float64 // current store score
	OrigScore   float64 // score as sent: due time (ms) or priority
	Nonce       float64 // producer call that wrote it last
	LastError   string
	Body        []byte
}

// envelopeHeader is the size of the fixed part: u8 u8 u16 f64 f64 f64 f64 u16.
const envelopeHeader = 1 + 1 + 2 + 8*4 + 2

// ErrBadEnvelope is returned for a value that is not an RMQ envelope.
var ErrBadEnvelope = errors.New("rmq: malformed message envelope")

// DecodeEnvelope parses an envelope. Body aliases b.
func DecodeEnvelope(b []byte) (Envelope, error) {
	if len(b) < envelopeHeader || b[0] != 1 {
		return Envelope{}, ErrBadEnvelope
	}
	f := func(off int) float64 { return math.Float64frombits(binary.BigEndian.Uint64(b[off:])) }
	elen := int(binary.BigEndian.Uint16(b[36:]))
	if len(b) < envelopeHeader+elen {
		return Envelope{}, ErrBadEnvelope
	}
	return Envelope{
		Type:        int(b[1]),
		Failures:    int(binary.BigEndian.Uint16(b[2:])),
		FirstSentMs: f(4),
		Score:       f(12),
		OrigScore:   f(20),
		Nonce:       f(28),
		LastError:   string(b[envelopeHeader : envelopeHeader+elen]),
		Body:        b[envelopeHeader+elen:],
	}, nil
}

// EncodeEnvelope is the inverse of DecodeEnvelope (tests and tools write
// envelopes with it; the scripts write their own).
func EncodeEnvelope(e Envelope) []byte {
	err := e.LastError
	if len(err) > 4096 {
		err = err[:4096]
	}
	b := make([]byte, envelopeHeader, envelopeHeader+len(err)+len(e.Body))
	b[0] = 1
	b[1] = byte(e.Type)
	binary.BigEndian.PutUint16(b[2:], uint16(min(e.Failures, math.MaxUint16)))
	for i, v := range []float64{e.FirstSentMs, e.Score, e.OrigScore, e.Nonce} {
		binary.BigEndian.PutUint64(b[4+8*i:], math.Float64bits(v))
	}
	binary.BigEndian.PutUint16(b[36:], uint16(len(err)))
	b = append(b, err...)
	return append(b, e.Body...)
}

// TokenMod splits a prepare score: deadlineSeconds*TokenMod + token.
const TokenMod = 1_000_000

// SplitPrepareScore returns the lease deadline (Unix seconds) and the
// delivery token of a prepare score. The attempt is token % 1000.
func SplitPrepareScore(score float64) (deadlineSec int64, token int64) {
	s := int64(score)
	return s / TokenMod, s % TokenMod
}
