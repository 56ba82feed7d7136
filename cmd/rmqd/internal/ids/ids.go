package ids

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	mrand "math/rand/v2"
	"time"

	"github.com/oklog/ulid/v2"
)

// Tokens and request ids come from generators that share nothing: a
// request id, shown to anyone who sends a request, tells nothing about a
// token made in the same millisecond (with one generator for both, as
// ulid.Make was, a request id disclosed about 48 of a token's 80 random
// bits).

// NewToken returns a fresh API token: 128 bits from crypto/rand, written
// as 26 characters of Crockford base32. That is the text form of a ULID,
// lmstfy's token shape, so a client that checks the shape of a token (or
// parses it as a ULID) accepts it; but no part of it is a timestamp, which
// would say when the token was made and leave fewer bits to guess. Tokens
// of the old shape (a ULID: 48 bits of time, 80 of math/rand) are looked
// up like any other and keep working.
func NewToken() string {
	var u ulid.ULID
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails (it crashes the program instead)
	return u.String()
}

// NewRequestID returns a request id: a ULID of the millisecond now, as
// lmstfy's are, whose 80 random bits come from math/rand/v2's
// generator (ChaCha8, per thread, seeded by the runtime): not from
// crypto/rand, which makes tokens, nor from the monotonic reader of
// ulid.Make, which makes job ids.
func NewRequestID(now time.Time) string {
	var u ulid.ULID
	_ = u.SetTime(ulid.Timestamp(now)) // fails only after the year 10889
	binary.BigEndian.PutUint64(u[6:14], mrand.Uint64())
	binary.BigEndian.PutUint16(u[14:], uint16(mrand.Uint32()))
	return u.String()
}

// Fingerprint names a token in log lines: "~" and the first 8 hex digits
// of its SHA-256, enough to tell one token's lines from another's (and to
// find them from the token), not to use or recover it.
func Fingerprint(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "~" + hex.EncodeToString(sum[:4])
}
