package keyspace

import (
	"github.com/rmq-go/rmq/topic"
)

// UniqueKeys are the keys unique sends (producer.WithUniqueFor) add to a
// topic slot, in the slot's hash tag: the send script checks and records
// in the same call that stores the message. Entries whose window has
// passed are cleared by later unique sends, a few per message.
type UniqueKeys struct {
	Until string // ZSET id -> Redis ms until which a send of the id is refused
	Nonce string // HASH id -> nonce of the send that recorded the window
}

// UniqueKeysFor returns the unique-send keys of slot index of topic t.
func UniqueKeysFor(prefix string, t topic.Topic, index int) UniqueKeys {
	base := prefix + ":" + Tag(t.Name(), index) + ":"
	return UniqueKeys{Until: base + "uniq", Nonce: base + "uniqn"}
}
