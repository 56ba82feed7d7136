package slots

import (
	"errors"
	"fmt"
	"hash/crc32"
	"strings"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/topic"
)

// DefaultPrefix is the key prefix used when none is configured.
const DefaultPrefix = "rmq"

// ErrInvalidPrefix is returned for key prefixes that are empty, too long or
// contain characters that would break the hash tag ('{', '}') or the layout.
var ErrInvalidPrefix = errors.New("rmq: invalid key prefix")

// ValidatePrefix checks a key prefix: 1..64 characters of [A-Za-z0-9._:-].
func ValidatePrefix(p string) error {
	if len(p) == 0 || len(p) > 64 {
		return fmt.Errorf("%w: length %d (want 1..64)", ErrInvalidPrefix, len(p))
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == ':'
		if !ok {
			return fmt.Errorf("%w: %q", ErrInvalidPrefix, p)
		}
	}
	return nil
}

// Index returns the topic slot of a message: CRC32-IEEE(basis) mod slotAmount.
// slotAmount is a power of two, so the modulo keeps the low bits.
func Index(basis []byte, slotAmount int) int {
	return int(crc32.ChecksumIEEE(basis) & uint32(slotAmount-1))
}

// IndexString is Index for a string basis, without a copy.
func IndexString(basis string, slotAmount int) int {
	return int(crc32.ChecksumIEEE([]byte(basis)) & uint32(slotAmount-1))
}

// Keys are the Redis keys of one topic slot.
type Keys struct {
	Store   string // ZSET id -> due time (ms) or priority
	Prepare string // ZSET id -> lease deadline and delivery token
	Dead    string // ZSET id -> time of death (ms)
	Msg     string // HASH id -> envelope of a waiting or in-flight message
	DeadMsg string // HASH id -> envelope of a dead message
	Wake    string // pub/sub channel: the slot's head changed
	Delayed string // ZSET id -> due time (ms) of a priority message that waits for its time
}

// keySuffixes are the suffixes of a slot's keys, in the order of Keys.
var keySuffixes = [7]string{"store", "prepare", "dead", "msg", "deadmsg", "wake", "delayed"}

// KeysFor returns the keys of slot index of topic t under prefix. They all
// share the slot's hash tag "{<topic>:<index>:<n>}", where n places the tag
// on a chosen Redis Cluster hash slot; the tag depends on the topic's name
// and the index only.
func KeysFor(prefix string, t topic.Topic, index int) Keys {
	tag := keyspace.Tag(t.Name(), index)
	// The seven keys are substrings of one string: one allocation, not
	// seven, for each slot of each topic a client registers.
	base := len(prefix) + 1 + len(tag) + 1
	var b strings.Builder
	b.Grow(7*base + len(keySuffixes[0]+keySuffixes[1]+keySuffixes[2]+keySuffixes[3]+keySuffixes[4]+keySuffixes[5]+keySuffixes[6]))
	var ends [8]int
	for i, suffix := range keySuffixes {
		b.WriteString(prefix)
		b.WriteByte(':')
		b.WriteString(tag)
		b.WriteByte(':')
		b.WriteString(suffix)
		ends[i+1] = b.Len()
	}
	all := b.String()
	return Keys{
		Store:   all[ends[0]:ends[1]],
		Prepare: all[ends[1]:ends[2]],
		Dead:    all[ends[2]:ends[3]],
		Msg:     all[ends[3]:ends[4]],
		DeadMsg: all[ends[4]:ends[5]],
		Wake:    all[ends[5]:ends[6]],
		Delayed: all[ends[6]:ends[7]],
	}
}

// TopicsKey is the HASH of stored topic definitions: name -> Definition().
func TopicsKey(prefix string) string { return prefix + ":topics" }

// PausedKey is the HASH of paused topics: name -> Redis time (ms) of the
// pause. Consumers read it when they start and hear changes on the wake
// channels.
func PausedKey(prefix string) string { return prefix + ":paused" }

// ErrOwnershipLost is the cause of handler contexts cancelled in ZooKeeper
// mode (rmq.WithZooKeeper) because this worker could no longer prove that
// its ZooKeeper session, and with it the ownership of its slots, is alive.
var ErrOwnershipLost = errors.New("rmq: slot ownership lost (ZooKeeper session unconfirmed or expired)")
