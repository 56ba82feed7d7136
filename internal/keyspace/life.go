package keyspace

// LifeKeys are the keys of a topic slot's messages after hand-off
// (luascripts/lifelib.lua), in the slot's hash tag: the records of
// finished messages a topic retains, their expiry index, the slot's event
// log, the ids Wait calls wait for, and the channel that tells them.
type LifeKeys struct {
	Done    string // HASH id -> record of a finished message
	DoneQ   string // ZSET id -> when its record goes (ms)
	Events  string // STREAM the slot's event log
	Waiters string // HASH id -> how many Wait calls wait for it
	Finish  string // pub/sub channel: a waited-for id finished
}

// LifeKeysFor returns the life keys of slot index of the topic named
// topicName under prefix.
func LifeKeysFor(prefix, topicName string, index int) LifeKeys {
	base := prefix + ":" + Tag(topicName, index) + ":"
	return LifeKeys{Done: base + "done", DoneQ: base + "doneq", Events: base + "events", Waiters: base + "waiters", Finish: base + "fin"}
}

// Slice returns the keys in the order the scripts take them.
func (k LifeKeys) Slice() [5]string { return [5]string{k.Done, k.DoneQ, k.Events, k.Waiters, k.Finish} }
