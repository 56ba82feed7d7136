package scripts

import "encoding/binary"

// Send1Stamp added to send1.lua's type asks the script to stamp Redis's
// clock into the envelope and return it (range-merge sends always do).
const Send1Stamp = 8

// SendBatchPacked added to a sendbatch.lua group's type says its messages
// come packed: each one's last argument is SendEnvelope's envelope, not
// its body (never for a range-merge group: its window starts from Redis's
// clock). SendBatchClock added to any group's type asks for Redis's clock
// (µs) after the results.
const (
	SendBatchPacked = 32
	SendBatchClock  = 64
)

// SendEnvelope is the envelope a send stores for a new message: the
// version 2 header (typ, no failures, firstMs, score, nonce), then the
// options block opts with its length when there is one, then body: what
// send1.lua takes (without options) and a packed sendbatch.lua group's
// messages carry. firstMs is the sender's estimate of Redis's clock
// (send1.lua overwrites it, and the score, when it stamps its own); score
// and nonce are whole numbers below 2^53 (the header keeps 7 bytes of
// each).
func SendEnvelope(typ int, firstMs int64, score float64, nonce uint64, opts, body []byte) []byte {
	n := envelopeHeader2 + len(body)
	if len(opts) > 0 {
		n += 2 + len(opts)
	}
	b := make([]byte, envelopeHeader2, n)
	b[0] = 2
	b[1] = byte(typ & 3)
	if len(opts) > 0 {
		// Flag 4 of the version byte's type: an options block follows.
		b[1] += 16
	}
	binary.BigEndian.PutUint16(b[2:], 0)
	putUintN(b[4:10], uint64(max(firstMs, 0)))
	putUintN(b[10:17], uint64(max(score, 0)))
	putUintN(b[17:24], nonce)
	if len(opts) > 0 {
		b = binary.BigEndian.AppendUint16(b, uint16(len(opts)))
		b = append(b, opts...)
	}
	return append(b, body...)
}
