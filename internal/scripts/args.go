package scripts

import (
	"math/rand/v2"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// WakeCommand returns the publish command the scripts wake fetchers with:
// sharded pub/sub on a cluster (the channel lives on the slot's own node),
// plain pub/sub on a single node.
func WakeCommand(rdb redis.UniversalClient) string {
	if _, ok := rdb.(*redis.ClusterClient); ok {
		return "SPUBLISH"
	}
	return "PUBLISH"
}

// Nonce names one call that writes envelopes (a producer send, an Inspector
// requeue), so a script that go-redis runs twice for that call (after a lost
// reply) recognises its own work. 53 bits: the envelope keeps it in a double.
func Nonce() string {
	return strconv.FormatUint(NewNonce(), 10)
}

// NewNonce is a nonce as a number (Nonce is its text).
func NewNonce() uint64 { return rand.Uint64() >> 11 }
