package keyspace

import (
	"strings"

	"github.com/rmq-go/rmq/topic"
)

// The key layout: the names of a topic slot's keys and of the shared
// hashes under a key prefix. Every program of the module builds key names
// here; none of it is public API (a user addresses topics, not keys).

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
	tag := Tag(t.Name(), index)
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

// GroupKeys are the keys flow control adds to a topic slot (producer.
// WithGroup; docs/flow-control.md), in the slot's hash tag.
type GroupKeys struct {
	Queue  string // lex ZSET: the messages waiting in their groups, in order
	Places string // lex ZSET: the messages holding a place of their group
	Turn   string // ZSET group -> ms it may be served next: the rotation
	Rate   string // HASH group -> its rate's state
}

// GroupKeysFor returns the group keys of slot index of topic t.
func GroupKeysFor(prefix string, t topic.Topic, index int) GroupKeys {
	return GroupKeysForName(prefix, t.Name(), index)
}

// GroupKeysForName returns the group keys of slot index of the topic named
// topicName (GroupKeysFor, for a caller that knows the name only).
func GroupKeysForName(prefix, topicName string, index int) GroupKeys {
	base := prefix + ":" + Tag(topicName, index) + ":"
	return GroupKeys{Queue: base + "gq", Places: base + "gocc", Turn: base + "gturn", Rate: base + "grate"}
}

// FlowKeys are a topic's keys for its topic-wide limits, in a hash tag of
// their own ("{<topic>}"): on a single node the fetch keeps the rate and
// reads the concurrency itself; on a cluster the node of this tag hands
// out permits (luascripts/permit.lua).
type FlowKeys struct {
	Flow    string // HASH: the rate's state, blocked
	Holders string // ZSET permit call id -> when its kept reply goes (cluster)
	Permits string // HASH permit call id -> its kept reply (cluster)
	Places  string // ZSET place -> when it lapses: reservations and deliveries (cluster)
	Tokens  string // HASH delivery holding a place -> its delivery token (cluster)
}

// FlowKeysFor returns the topic-wide flow keys of topic t.
func FlowKeysFor(prefix string, t topic.Topic) FlowKeys {
	base := prefix + ":{" + t.Name() + "}:"
	return FlowKeys{Flow: base + "flow", Holders: base + "holders", Permits: base + "permits", Places: base + "places", Tokens: base + "ptokens"}
}

// LimitsKey is the HASH of topics' stored flow limits: name -> limits
// (rmq.Inspector.SetLimits). The value stored wins over a consumer's
// options.
func LimitsKey(prefix string) string { return prefix + ":limits" }

// GroupedKey is the HASH of topics whose messages carry groups: name -> 1,
// set by a producer before its first grouped send, so consumers serve them
// in turn.
func GroupedKey(prefix string) string { return prefix + ":grouped" }

// AdaptiveKey is the HASH of the adaptive concurrency limits the clients
// consuming topic t report: client -> "limit expiryMs".
func AdaptiveKey(prefix string, t topic.Topic) string { return prefix + ":{" + t.Name() + "}:adaptive" }
