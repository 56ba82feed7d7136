package scripts

import "encoding/binary"

// Send1Stamp added to send1.lua's type asks the script to stamp Redis's
// clock into the envelope and return it (range-merge sends always do).
const Send1Stamp = 8

// Send1Envelope is the envelope send1.lua stores for a new message: the
// version 2 header without options (typ, no failures, firstMs, score,
// nonce), then body. firstMs is the sender's estimate of Redis's clock;
// the script overwrites it (and the score) when it stamps its own. score
// and nonce are whole numbers below 2^53 (the header keeps 7 bytes of
// each).
func Send1Envelope(typ int, firstMs int64, score float64, nonce uint64, body []byte) []byte {
	b := make([]byte, envelopeHeader2, envelopeHeader2+len(body))
	b[0] = 2
	b[1] = byte(typ & 3)
	binary.BigEndian.PutUint16(b[2:], 0)
	putUintN(b[4:10], uint64(max(firstMs, 0)))
	putUintN(b[10:17], uint64(max(score, 0)))
	putUintN(b[17:24], nonce)
	return append(b, body...)
}
