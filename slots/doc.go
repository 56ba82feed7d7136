// Package slots maps messages to topic slots: a message goes to slot
// CRC32-IEEE(slot basis) mod the topic's slot amount, where the slot basis
// is the message's group (producer.WithGroup), else producer.WithSlotBasis's
// bytes, else its id.
// It also checks key prefixes (ValidatePrefix).
//
//	t := topic.MustNew("orders.v1", topic.FixedTime, 16)
//	// The slot of a message whose slot basis is its id.
//	i := slots.IndexString("order-1001", t.SlotAmount())
//
// The Redis keys of a slot are not public API: every key of one slot
// carries the hash tag {<topic>:<index>:<n>}, so a script that touches one
// slot touches one Redis Cluster hash slot, and n is chosen so that a
// topic's slots spread evenly over a cluster's masters. docs/design.md in
// the repository shows the whole layout.
package slots
