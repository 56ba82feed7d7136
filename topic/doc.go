// Package topic defines what a topic is: a name, a message type and a slot
// amount. A Topic is an immutable value; build one with New (or MustNew for
// package-level variables) and pass it to every call that names the topic:
// rmq.Client.Register, the producer's sends, Pull, the Inspector.
//
//	var (
//		orders = topic.MustNew("order-timeouts", topic.FixedTime, 16)
//		prices = topic.MustNew("price-changes", topic.RangeMerge, 8)
//		jobs   = topic.MustNew("jobs", topic.Priority, 1)
//	)
//
// # Types
//
// The Type decides what a message's store score means and how a repeat of
// the same id merges:
//
//   - RangeMerge: due a time range after the first send; repeats sent while
//     it waits merge into one delivery at the first due time.
//   - Priority: delivered highest priority first (priorities from
//     MinPriority up; the scores below are the retries', which rank below
//     every fresh message); a repeat takes the new priority.
//   - FixedTime: due at an exact instant; a repeat replaces the instant.
//
// RangeMerge and FixedTime are time-based (Type.TimeBased): a consumer
// sleeps until the next due time.
//
// # Slots
//
// The slot amount is a power of two from 1 to MaxSlotAmount. A message goes
// to the slot CRC32(slot basis) mod slot amount (package slots), and each
// slot is one Redis hash tag, so every script call touches one slot. More
// slots spread a topic over the masters of a Redis Cluster and over the
// workers of a ZooKeeper fleet, which consumes each slot serially, in
// score order (rmq.WithZooKeeper).
//
// # Stored definitions
//
// The client stores every topic it starts or sends to as its Definition
// ("type:slotAmount") under the key prefix, and refuses a topic whose name
// is stored with another type or slot amount (ErrConflict): changing
// either would strand messages in slots nobody reads. To change a topic's
// type or slot amount, use a new name.
//
// # Errors
//
// New returns ErrInvalidName (names outside [A-Za-z0-9._-]{1,128}: braces
// and colons would break the hash tag), ErrInvalidType or
// ErrInvalidSlotAmount; ParseDefinition returns ErrInvalidDefinition, and
// ParseType ErrInvalidType. A Topic is a value and safe to share between
// goroutines.
//
// In the repository, docs/api.md has each type's rules and docs/cluster.md
// where a topic's slots go on a Redis Cluster.
package topic
