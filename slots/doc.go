// Package slots maps messages to topic slots and names the Redis keys of a
// slot. Every key of one slot carries the hash tag {<topic>:<index>:<n>}, so
// a script that touches one slot touches one Redis Cluster hash slot.
//
// Two hashes are involved and they are different: CRC32 (IEEE) of the slot
// basis picks the topic slot; Redis's CRC16 of the "{topic:index:n}" tag
// picks the cluster hash slot, hence the master that holds it, and n is
// chosen so that a topic's slots spread evenly over the masters.
//
//	t := topic.MustNew("orders.v1", topic.FixedTime, 16)
//	// The slot of a message whose slot basis is its id.
//	i := slots.IndexString("order-1001", t.SlotAmount())
//	// Its keys: k.Store is "rmq:{orders.v1:<i>:<n>}:store", and so on.
//	k := slots.KeysFor(slots.DefaultPrefix, t, i)
//
// A slot's keys are Keys (store, prepare, dead, msg, deadmsg, wake,
// delayed) and, for flow control, GroupKeys. A topic's fleet-wide flow state
// (FlowKeys, AdaptiveKey) has a tag of its own, {<topic>}: on a cluster the
// permit script names it alone, on a single node the fetch and ack scripts
// name it with slot keys. The keys of the prefix (TopicsKey, PausedKey,
// LimitsKey, GroupedKey) carry no tag, and no script names them.
// docs/design.md in the repository has the whole layout.
package slots
