// Package consumer holds what a listener of an RMQ topic sees and sets:
// Message, MessageListener and ListenerFunc, the per-topic options given to
// rmq.Client.Register, the Observer of deliveries, and the errors a handler
// context is cancelled with. The client (package rmq) runs the consumers.
//
// Consumption is at least once, through a two-phase protocol: a fetch moves
// due messages from the slot's store to its prepare set (a lease), the
// listener runs, and the delivery ends with an ack (the listener returned
// nil) or a rollback (it returned an error, panicked, ran past its timeout,
// or its lease ran out). A message rolled back more than MaxRetries times
// moves to the slot's dead queue.
//
// Fetching does not poll. A fetcher sleeps until the next due score of its
// slots and is woken early by a notification when a producer stores a
// message that becomes a slot's new head. One fetch moves as many due
// messages as there is free handler capacity, in one script call per slot.
package consumer
