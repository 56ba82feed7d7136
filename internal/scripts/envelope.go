package scripts

import (
	"encoding/binary"
	"errors"
	"math"
	"sort"
)

// Envelope is what the msg and deadmsg hashes hold for one message. The
// layout is written by lib.lua (its header comment is the reference); this
// is its Go reader, and a writer for tests and tools.
type Envelope struct {
	Version     int     // 1 (read only) or 2
	Type        int     // 1 range-merge, 2 priority, 3 fixed-time
	Failures    int     // failed attempts so far
	FirstSentMs float64 // Redis time of the first send (ms)
	Score       float64 // current store score
	OrigScore   float64 // score as sent: due time (ms) or priority
	Nonce       float64 // producer call that wrote it last
	LastError   string
	Options     Options // per-message options (version 2 only)
	Body        []byte
}

// Options are the per-message options an envelope may carry. The zero
// value is "none": an envelope without options stores no byte for them.
type Options struct {
	MaxRetries    int  // with HasMaxRetries: retries after the first attempt
	HasMaxRetries bool //
	ExpiresAtMs   int64
	TimeoutMs     int64
	Snoozes       int   // snoozes so far (consumer.Snooze)
	NotBeforeMs   int64 // priority: competes from then on
	Headers       map[string]string
	// Group is the message's group (producer.WithGroup), 1..255 bytes;
	// "" for none.
	Group string
}

// IsZero reports whether o carries nothing.
func (o Options) IsZero() bool {
	return !o.HasMaxRetries && o.ExpiresAtMs == 0 && o.TimeoutMs == 0 && o.Snoozes == 0 && o.NotBeforeMs == 0 && len(o.Headers) == 0 && o.Group == ""
}

// Option mask bits, as lib.lua's opt_encode writes them.
const (
	optMaxRetries = 1 << iota
	optExpiresAt
	optTimeout
	optSnoozes
	optNotBefore
	optHeaders
	optGroup
)

// Envelope flag bits (second byte, times 4, above the type).
const (
	flagOrig = 1 << iota
	flagErr
	flagOpts
)

// envelopeHeader1 is version 1's fixed part: u8 u8 u16 f64 f64 f64 f64 u16;
// envelopeHeader2 version 2's: u8 u8 u16 u48 u56 u56.
const (
	envelopeHeader1 = 1 + 1 + 2 + 8*4 + 2
	envelopeHeader2 = 1 + 1 + 2 + 6 + 7 + 7
)

// ErrBadEnvelope is returned for a value that is not an RMQ envelope.
var ErrBadEnvelope = errors.New("rmq: malformed message envelope")

// DecodeEnvelope parses an envelope of either version. Body aliases b.
func DecodeEnvelope(b []byte) (Envelope, error) {
	if len(b) > 0 && b[0] == 1 {
		return decodeV1(b)
	}
	if len(b) < envelopeHeader2 || b[0] != 2 {
		return Envelope{}, ErrBadEnvelope
	}
	typ := int(b[1] & 3)
	flags := int(b[1] >> 2)
	e := Envelope{
		Version:     2,
		Type:        typ,
		Failures:    int(binary.BigEndian.Uint16(b[2:])),
		FirstSentMs: float64(uintN(b[4:10])),
		Score:       float64(uintN(b[10:17])),
		Nonce:       float64(uintN(b[17:24])),
	}
	e.OrigScore = e.Score
	p := b[envelopeHeader2:]
	if flags&flagOrig != 0 {
		if len(p) < 7 {
			return Envelope{}, ErrBadEnvelope
		}
		e.OrigScore = float64(uintN(p[:7]))
		p = p[7:]
	}
	if flags&flagErr != 0 {
		s, rest, ok := lenPrefixed(p)
		if !ok {
			return Envelope{}, ErrBadEnvelope
		}
		e.LastError, p = string(s), rest
	}
	if flags&flagOpts != 0 {
		s, rest, ok := lenPrefixed(p)
		if !ok {
			return Envelope{}, ErrBadEnvelope
		}
		o, err := DecodeOptions(s)
		if err != nil {
			return Envelope{}, err
		}
		e.Options, p = o, rest
	}
	e.Body = p
	return e, nil
}

func decodeV1(b []byte) (Envelope, error) {
	if len(b) < envelopeHeader1 {
		return Envelope{}, ErrBadEnvelope
	}
	f := func(off int) float64 { return math.Float64frombits(binary.BigEndian.Uint64(b[off:])) }
	elen := int(binary.BigEndian.Uint16(b[36:]))
	if len(b) < envelopeHeader1+elen {
		return Envelope{}, ErrBadEnvelope
	}
	return Envelope{
		Version:     1,
		Type:        int(b[1]),
		Failures:    int(binary.BigEndian.Uint16(b[2:])),
		FirstSentMs: f(4),
		Score:       f(12),
		OrigScore:   f(20),
		Nonce:       f(28),
		LastError:   string(b[envelopeHeader1 : envelopeHeader1+elen]),
		Body:        b[envelopeHeader1+elen:],
	}, nil
}

// uintN reads a big-endian unsigned integer of len(b) bytes.
func uintN(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

func putUintN(b []byte, v uint64) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
}

// lenPrefixed splits a u16-length-prefixed part off p.
func lenPrefixed(p []byte) (part, rest []byte, ok bool) {
	if len(p) < 2 {
		return nil, nil, false
	}
	n := int(binary.BigEndian.Uint16(p))
	if len(p) < 2+n {
		return nil, nil, false
	}
	return p[2 : 2+n], p[2+n:], true
}

// EncodeEnvelope writes e in version 2, as lib.lua's env_encode does (tests
// and tools write envelopes with it; the scripts write their own).
func EncodeEnvelope(e Envelope) []byte {
	err := e.LastError
	if len(err) > 4096 {
		err = err[:4096]
	}
	opts := EncodeOptions(e.Options)
	flags := 0
	b := make([]byte, envelopeHeader2, envelopeHeader2+7+2+len(err)+2+len(opts)+len(e.Body))
	if e.OrigScore != e.Score {
		flags |= flagOrig
		b = append(b, make([]byte, 7)...)
		putUintN(b[len(b)-7:], uint64(e.OrigScore))
	}
	if err != "" {
		flags |= flagErr
		b = binary.BigEndian.AppendUint16(b, uint16(len(err)))
		b = append(b, err...)
	}
	if len(opts) > 0 {
		flags |= flagOpts
		b = binary.BigEndian.AppendUint16(b, uint16(len(opts)))
		b = append(b, opts...)
	}
	b[0] = 2
	b[1] = byte(e.Type&3 | flags<<2)
	binary.BigEndian.PutUint16(b[2:], uint16(min(e.Failures, math.MaxUint16)))
	putUintN(b[4:10], uint64(e.FirstSentMs))
	putUintN(b[10:17], uint64(e.Score))
	putUintN(b[17:24], uint64(e.Nonce))
	return append(b, e.Body...)
}

// EncodeEnvelopeV1 writes e in version 1, the format of earlier releases,
// so tests can check that such envelopes still decode and deliver.
func EncodeEnvelopeV1(e Envelope) []byte {
	err := e.LastError
	if len(err) > 4096 {
		err = err[:4096]
	}
	b := make([]byte, envelopeHeader1, envelopeHeader1+len(err)+len(e.Body))
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

// EncodeOptions writes an options block (nil when o is zero). Header keys
// go in sorted order, so equal options encode equally. Limits on headers
// are the producer's to check: here each key must fit a u8 length and each
// value a u16.
func EncodeOptions(o Options) []byte {
	if o.IsZero() {
		return nil
	}
	var mask byte
	b := []byte{0}
	if o.HasMaxRetries {
		mask |= optMaxRetries
		b = binary.BigEndian.AppendUint16(b, uint16(o.MaxRetries))
	}
	if o.ExpiresAtMs != 0 {
		mask |= optExpiresAt
		b = append(b, make([]byte, 6)...)
		putUintN(b[len(b)-6:], uint64(o.ExpiresAtMs))
	}
	if o.TimeoutMs != 0 {
		mask |= optTimeout
		b = binary.BigEndian.AppendUint32(b, uint32(o.TimeoutMs))
	}
	if o.Snoozes != 0 {
		mask |= optSnoozes
		b = append(b, byte(min(o.Snoozes, 255)))
	}
	if o.NotBeforeMs != 0 {
		mask |= optNotBefore
		b = append(b, make([]byte, 6)...)
		putUintN(b[len(b)-6:], uint64(o.NotBeforeMs))
	}
	if len(o.Headers) > 0 {
		mask |= optHeaders
		h := EncodeHeaders(o.Headers)
		b = binary.BigEndian.AppendUint16(b, uint16(len(h)))
		b = append(b, h...)
	}
	if o.Group != "" {
		mask |= optGroup
		b = append(b, byte(len(o.Group)))
		b = append(b, o.Group...)
	}
	b[0] = mask
	return b
}

// DecodeOptions reads an options block.
func DecodeOptions(b []byte) (Options, error) {
	var o Options
	if len(b) < 1 {
		return o, ErrBadEnvelope
	}
	mask := b[0]
	p := b[1:]
	take := func(n int) ([]byte, bool) {
		if len(p) < n {
			return nil, false
		}
		v := p[:n]
		p = p[n:]
		return v, true
	}
	if mask&optMaxRetries != 0 {
		v, ok := take(2)
		if !ok {
			return o, ErrBadEnvelope
		}
		o.MaxRetries, o.HasMaxRetries = int(binary.BigEndian.Uint16(v)), true
	}
	if mask&optExpiresAt != 0 {
		v, ok := take(6)
		if !ok {
			return o, ErrBadEnvelope
		}
		o.ExpiresAtMs = int64(uintN(v))
	}
	if mask&optTimeout != 0 {
		v, ok := take(4)
		if !ok {
			return o, ErrBadEnvelope
		}
		o.TimeoutMs = int64(binary.BigEndian.Uint32(v))
	}
	if mask&optSnoozes != 0 {
		v, ok := take(1)
		if !ok {
			return o, ErrBadEnvelope
		}
		o.Snoozes = int(v[0])
	}
	if mask&optNotBefore != 0 {
		v, ok := take(6)
		if !ok {
			return o, ErrBadEnvelope
		}
		o.NotBeforeMs = int64(uintN(v))
	}
	if mask&optHeaders != 0 {
		h, rest, ok := lenPrefixed(p)
		if !ok {
			return o, ErrBadEnvelope
		}
		p = rest
		hs, err := DecodeHeaders(h)
		if err != nil {
			return o, err
		}
		o.Headers = hs
	}
	if mask&optGroup != 0 {
		v, ok := take(1)
		if !ok {
			return o, ErrBadEnvelope
		}
		g, ok := take(int(v[0]))
		if !ok {
			return o, ErrBadEnvelope
		}
		o.Group = string(g)
	}
	return o, nil
}

// EncodeHeaders writes headers as u8 count, then per header u8 key length,
// key, u16 value length, value; keys sorted.
func EncodeHeaders(h map[string]string) []byte {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b := []byte{byte(len(keys))}
	for _, k := range keys {
		v := h[k]
		b = append(b, byte(len(k)))
		b = append(b, k...)
		b = binary.BigEndian.AppendUint16(b, uint16(len(v)))
		b = append(b, v...)
	}
	return b
}

// DecodeHeaders is the inverse of EncodeHeaders.
func DecodeHeaders(b []byte) (map[string]string, error) {
	if len(b) < 1 {
		return nil, ErrBadEnvelope
	}
	n := int(b[0])
	p := b[1:]
	h := make(map[string]string, n)
	for range n {
		if len(p) < 1 || len(p) < 1+int(p[0]) {
			return nil, ErrBadEnvelope
		}
		k := string(p[1 : 1+int(p[0])])
		p = p[1+int(p[0]):]
		v, rest, ok := lenPrefixed(p)
		if !ok {
			return nil, ErrBadEnvelope
		}
		h[k] = string(v)
		p = rest
	}
	return h, nil
}

// TokenMod splits a prepare score: deadlineSeconds*TokenMod + token.
const TokenMod = 1_000_000

// SplitPrepareScore returns the lease deadline (Unix seconds) and the
// delivery token of a prepare score. The attempt is token % 1000.
func SplitPrepareScore(score float64) (deadlineSec int64, token int64) {
	s := int64(score)
	return s / TokenMod, s % TokenMod
}
