package slots

import (
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/topic"
)

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
	base := prefix + ":" + keyspace.Tag(t.Name(), index) + ":"
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
