// Package producer sends messages to RMQ topics: range-merge messages that
// collapse repeats within a time window, priority messages delivered highest
// first, and fixed-time messages delivered at an exact instant.
//
// Every send is one Lua script call that touches one topic slot. A send is
// safe to repeat: the same id merges by the topic type's rule, and a script
// that go-redis resends after a lost reply recognises its own earlier run.
package producer
