// Package keyspace places the Redis keys of topic slots: the hash tag of a
// slot (so that a topic's slots spread evenly over a cluster's masters),
// Redis Cluster's hash slot of a key, and the owner epoch keys of ZooKeeper
// mode. The public key layout (KeysFor) is built on Tag.
package keyspace

import (
	"strconv"
	"sync"
	"sync/atomic"
)

// Key placement on a Redis Cluster.
//
// Redis Cluster puts a key in one of 16384 hash slots, CRC16 of its hash
// tag modulo 16384, and each master serves ranges of hash slots (three
// masters made by `redis-cli --cluster create` serve 0-5460, 5461-10922
// and 10923-16383). A topic slot's keys all carry one hash tag, so the
// topic slot lives on one master. Plain "{topic:index}" tags hash like
// random numbers: 16 topic slots on 3 masters end up 8/4/4 or 3/5/8 for
// some topic names, one master doing twice the work of another.
//
// So the tag carries a third part, a small number n chosen to place the
// topic slot on purpose: "{topic:index:n}". The 16384 hash slots are cut
// into 1024 ranges of 16; topic slot i goes to range
//
//	r(i) = (bitreverse10(i mod 1024) + CRC16(topic)/16) mod 1024
//
// and n is the smallest number >= 0 whose tag hashes into that range. The
// bit reversal spaces the first N slots of a topic evenly whatever the
// power of two N is (for N <= 1024 exactly one topic slot per 16384/N hash
// slots), so every master gets its share of each topic, within one, and
// the rotation by the topic name's own hash spreads topics that have a
// single slot. Everything is derived from the topic name and index alone:
// every process computes the same keys, and a slot's keys never depend on
// the topic's slot amount.

// NumHashSlots is the number of hash slots of a Redis Cluster.
const NumHashSlots = 16384

const (
	tagRanges = 1024                     // ranges of hash slots a tag is placed in
	tagSpan   = NumHashSlots / tagRanges // hash slots per range
	tagBits   = 10                       // log2(tagRanges)
	tagTries  = 1 << 24                  // bound of the suffix search (never reached)
)

var crc16Table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

// crc16 continues a CRC-16/XMODEM (Redis Cluster's key hash) over s.
func crc16(crc uint16, s string) uint16 {
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^s[i]]
	}
	return crc
}

// HashSlot returns the Redis Cluster hash slot of a key, as CLUSTER KEYSLOT
// does: CRC16 of the key's hash tag (the part between the first '{' and the
// next '}', if not empty) or else of the whole key, modulo 16384.
func HashSlot(key string) int {
	if i := indexByte(key, '{'); i >= 0 {
		if j := indexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(0, key)) % NumHashSlots
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// TagRange returns the range of hash slots, [lo, lo+16), that the tag of
// slot index of a topic is placed in (see "Key placement on a Redis Cluster"
// above).
func TagRange(topicName string, index int) (lo int) {
	base := int(crc16(0, topicName)) % NumHashSlots / tagSpan
	r := (bitReverse(index%tagRanges, tagBits) + base) % tagRanges
	return r * tagSpan
}

func bitReverse(x, bits int) int {
	out := 0
	for range bits {
		out = out<<1 | x&1
		x >>= 1
	}
	return out
}

// tags caches computed tags per topic name (*topicTags): a client that
// registers 1,000 topics of 16 slots stores 1,000 entries, not 16,000, and
// a send reads its tag without a lock.
var tags sync.Map

// topicTags holds a topic's tags by slot index, grown copy-on-write to
// the next power of two past the highest index asked for.
type topicTags struct {
	mu  sync.Mutex // serialises growth
	all atomic.Pointer[[]string]
}

// sufCRC holds CRC16 of the decimal numbers below sufTable. CRC-16/XMODEM
// is linear (no initial value, no final xor), so the CRC of head+suffix is
// the CRC of head followed by len(suffix) zero bytes, xor the suffix's own
// CRC: sufFirst indexes these by their hash slot bits, and a number past
// the table (needed once in some 20000 tags) is hashed as it comes.
const sufTable = 10000

var sufCRC = sync.OnceValue(func() []uint16 {
	t := make([]uint16, sufTable)
	var buf [8]byte
	for n := range t {
		t[n] = crc16b(0, strconv.AppendInt(buf[:0], int64(n), 10))
	}
	return t
})

// sufFirst[d-1][v] is 1 + the smallest number of d digits (below sufTable)
// whose decimal CRC has low 14 bits v; 0: none.
var sufFirst = sync.OnceValue(func() *[4][NumHashSlots]uint16 {
	var t [4][NumHashSlots]uint16
	suf := sufCRC()
	for n := sufTable - 1; n >= 0; n-- {
		d := len(strconv.Itoa(n)) - 1
		t[d][int(suf[n])%NumHashSlots] = uint16(n + 1)
	}
	return &t
})

// firstSuffix returns the smallest number below sufTable whose suffix
// places a head with shifted CRCs in [lo, lo+tagSpan), if there is one.
func firstSuffix(shifted *[8]uint16, lo int) (int, bool) {
	first := sufFirst()
	for d := 1; d <= 4; d++ {
		x := int(shifted[d]) % NumHashSlots
		best := 0
		for j := range tagSpan {
			if v := first[d-1][(lo+j)^x]; v != 0 && (best == 0 || v < uint16(best)) {
				best = int(v)
			}
		}
		if best != 0 {
			return best - 1, true
		}
	}
	return 0, false
}

func crc16b(crc uint16, b []byte) uint16 {
	for _, c := range b {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^c]
	}
	return crc
}

// Tag returns the hash tag of a slot, braces included: "{topic:index:n}",
// where n is the smallest number that places the tag's Redis Cluster hash
// slot in TagRange(topic, index), so that the slots of a topic spread
// evenly over the cluster's masters. The tag depends on the topic name and
// index only: every process derives the same keys.
func Tag(topicName string, index int) string {
	v, ok := tags.Load(topicName)
	if !ok {
		v, _ = tags.LoadOrStore(topicName, &topicTags{})
	}
	tt := v.(*topicTags)
	var cur []string
	if p := tt.all.Load(); p != nil {
		cur = *p
		if index < len(cur) {
			return cur[index]
		}
	}
	if index < 0 {
		return tagOf(topicName, index)
	}
	// The slots up to the next power of two: topics have 2^k slots, so
	// this computes each of them once, in log2(slots) steps.
	n := 1
	for n <= index {
		n *= 2
	}
	fresh := make([]string, n)
	for i := len(cur); i < n; i++ {
		fresh[i] = tagOf(topicName, i)
	}
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if p := tt.all.Load(); p != nil {
		if len(*p) >= n {
			return (*p)[index]
		}
		copy(fresh, *p)
	}
	tt.all.Store(&fresh)
	return fresh[index]
}

// tagOf computes Tag(topicName, index).
func tagOf(topicName string, index int) string {
	head := topicName + ":" + strconv.Itoa(index) + ":"
	lo := TagRange(topicName, index)
	// shifted[d] is the CRC of head followed by d zero bytes.
	var shifted [8]uint16
	shifted[0] = crc16(0, head)
	for d := 1; d < len(shifted); d++ {
		shifted[d] = crc16b(shifted[d-1], []byte{0})
	}
	// The hash slot is the CRC's low 14 bits and CRC and xor commute with
	// that mask, so for d digits the candidates that land in [lo, lo+16)
	// are those whose suffix CRC is one of 16 values: the table of the
	// smallest number of d digits with each low-14-bit CRC answers in 16
	// reads per digit count what the loop below tries one by one.
	if n, ok := firstSuffix(&shifted, lo); ok {
		return "{" + head + strconv.Itoa(n) + "}"
	}
	n, digits, next := sufTable, len(strconv.Itoa(sufTable)), sufTable*10
	for ; n < tagTries; n++ {
		if n == next {
			digits, next = digits+1, next*10
		}
		// Past the table (firstSuffix looked there): hashed as it comes.
		var buf [8]byte
		sc := crc16b(0, strconv.AppendInt(buf[:0], int64(n), 10))
		hs := int(shifted[digits]^sc) % NumHashSlots
		if hs >= lo && hs < lo+tagSpan {
			break
		}
	}
	// Every range is reached within a few thousand candidates (each has a
	// 1/1024 chance); were the bound ever hit, n = tagTries still gives a
	// deterministic, if unplaced, tag.
	return "{" + head + strconv.Itoa(n) + "}"
}
