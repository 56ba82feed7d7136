package keyspace

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rmq-go/rmq/internal/testkit/redisserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHashSlotPublishedCRC16(t *testing.T) {
	// Redis Cluster specification: CRC16 (XMODEM) of "123456789" is 0x31C3.
	require.Equal(t, uint16(0x31C3), crc16(0, "123456789"))
	assert.Equal(t, 0x31C3%NumHashSlots, HashSlot("123456789"))
	// Hash tags, as the specification's examples give them.
	assert.Equal(t, HashSlot("user1000"), HashSlot("{user1000}.following"))
	assert.Equal(t, HashSlot("user1000"), HashSlot("foo{user1000}{bar}"))
	assert.Equal(t, HashSlot("foo{}{bar}"), int(crc16(0, "foo{}{bar}"))%NumHashSlots, "empty tag: the whole key")
	assert.Equal(t, HashSlot("foo{{bar}}zap"), HashSlot("{bar"))
	// And as the test infrastructure's independent implementation does.
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = "ab{}:0"[r.IntN(6)]
		}
		assert.Equal(t, redisserver.KeySlot(string(b)), HashSlot(string(b)), "%q", b)
	}
}

// Every tag lies in its range; the ranges of the first N slots of a topic
// are N equally spaced ranges for every power of two N up to 1024.
func TestTagPlacement(t *testing.T) {
	for _, name := range []string{"orders", "t", "a.b-c_9", "x1234567890123456789012345678901234567890"} {
		base := TagRange(name, 0)
		for _, n := range []int{1, 2, 4, 16, 64, 256, 1024} {
			seen := map[int]bool{}
			for i := range n {
				lo := TagRange(name, i)
				require.Zero(t, lo%16)
				off := (lo - base + NumHashSlots) % NumHashSlots
				require.Zero(t, off%(NumHashSlots/n), "%s slot %d of %d: range %d not on the grid", name, i, n, lo)
				require.False(t, seen[lo], "%s: two slots in range %d", name, lo)
				seen[lo] = true
			}
		}
		for i := range 1100 {
			tag := Tag(name, i)
			hs := HashSlot("rmq:" + tag + ":store")
			lo := TagRange(name, i)
			require.True(t, hs >= lo && hs < lo+16, "%s: hash slot %d outside [%d,%d)", tag, hs, lo, lo+16)
			n, ok := strings.CutPrefix(tag, "{"+name+":"+strconv.Itoa(i)+":")
			require.True(t, ok && strings.HasSuffix(n, "}"), tag)
			_, err := strconv.Atoi(strings.TrimSuffix(n, "}"))
			require.NoError(t, err, tag)
		}
	}
	// Slot 0 of a topic sits where the topic name itself hashes.
	assert.Equal(t, HashSlot("orders")/16*16, TagRange("orders", 0))
}

// defaultMasters is how `redis-cli --cluster create` splits the hash slots
// over three masters.
func defaultMaster(hs int) int {
	switch {
	case hs <= 5460:
		return 0
	case hs <= 10922:
		return 1
	}
	return 2
}

func perMaster(n int, tag func(i int) string) [3]int {
	var c [3]int
	for i := range n {
		c[defaultMaster(HashSlot(tag(i)))]++
	}
	return c
}

// Topics of 16, 64 and 256 slots on three masters: with the placed tags
// every master holds its share within one, for every topic name; plain
// "{topic:index}" tags are off by up to half a share. The figures go to
// the test log (docs/cluster.md quotes them).
func TestTagSpreadOverThreeMasters(t *testing.T) {
	const topics = 200
	for _, n := range []int{16, 64, 256} {
		worstPlain, worstPlaced := [3]int{}, [3]int{}
		spread := func(c [3]int) int { return max(c[0], c[1], c[2]) - min(c[0], c[1], c[2]) }
		for k := range topics {
			name := fmt.Sprintf("topic-%d", k)
			plain := perMaster(n, func(i int) string { return "{" + name + ":" + strconv.Itoa(i) + "}" })
			placed := perMaster(n, func(i int) string { return Tag(name, i) })
			if spread(plain) > spread(worstPlain) {
				worstPlain = plain
			}
			if spread(placed) > spread(worstPlaced) {
				worstPlaced = placed
			}
			require.LessOrEqual(t, spread(placed), 1, "%s with %d slots: %v per master", name, n, placed)
		}
		for _, name := range []string{"orders", "prices", "jobs"} {
			t.Logf("%d slots, topic %-6s: plain %v, placed %v", n, name,
				perMaster(n, func(i int) string { return "{" + name + ":" + strconv.Itoa(i) + "}" }),
				perMaster(n, func(i int) string { return Tag(name, i) }))
		}
		t.Logf("%d slots, worst of %d topic names: plain %v, placed %v", n, topics, worstPlain, worstPlaced)
	}
}

func BenchmarkTag(b *testing.B) {
	for i := 0; i < b.N; i++ {
		Tag("bench-"+strconv.Itoa(i>>14), i&16383)
	}
}

// The epoch key shares the slot's hash tag, so the fenced scripts touch one
// cluster hash slot.
func TestEpochKeyInSlotTag(t *testing.T) {
	for i := range 16 {
		e := EpochKey("rmq", "orders", i)
		assert.Equal(t, "rmq:"+Tag("orders", i)+":epoch", e)
		assert.Equal(t, e, EpochKeys("rmq", "orders", 16)[i])
		assert.Equal(t, HashSlot("rmq:"+Tag("orders", i)+":store"), HashSlot(e))
	}
	assert.Equal(t, "{orders.v1:7:121}", Tag("orders.v1", 7))
}

// Tags are part of every stored key, so the table search must name exactly
// the tag the plain search does: the smallest suffix that places it.
func TestTagIsTheSmallestPlacingSuffix(t *testing.T) {
	for _, name := range []string{"orders", "t", "a.b-c_9", "tenant-0042.events", "x1234567890123456789012345678901234567890"} {
		for i := range 300 {
			head := name + ":" + strconv.Itoa(i) + ":"
			lo := TagRange(name, i)
			n := 0
			for ; ; n++ {
				if hs := HashSlot("{" + head + strconv.Itoa(n) + "}"); hs >= lo && hs < lo+16 {
					break
				}
			}
			require.Equal(t, "{"+head+strconv.Itoa(n)+"}", Tag(name, i))
		}
	}
}

// The per-topic cache grows while other goroutines read and grow it: every
// answer is the computed tag, whatever the order of indices asked.
func TestTagCacheUnderConcurrentGrowth(t *testing.T) {
	const topics, slots = 8, 300
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range topics * slots {
				i := (k*7919 + g*131) % (topics * slots)
				name := "grow-" + strconv.Itoa(i%topics)
				if got, want := Tag(name, i/topics), tagOf(name, i/topics); got != want {
					t.Errorf("Tag(%s, %d) = %s, want %s", name, i/topics, got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func BenchmarkTagCached(b *testing.B) {
	for i := range 16 {
		Tag("cached", i)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		Tag("cached", i&15)
	}
}
