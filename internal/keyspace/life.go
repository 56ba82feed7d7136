package keyspace

// LifeKeys are the keys of a topic slot's messages after hand-off
// (luascripts/lifelib.lua), in the slot's hash tag: the records of
// finished messages a topic retains, their expiry index, the slot's event
// log, the ids Wait calls wait for, the channel that tells them, and the
// latest progress of in-flight deliveries.
type LifeKeys struct {
	Done     string // HASH id -> record of a finished message
	DoneQ    string // ZSET id -> when its record goes (ms)
	Events   string // STREAM the slot's event log
	Waiters  string // HASH id -> how many Wait calls wait for it
	Finish   string // pub/sub channel: a waited-for id finished
	Progress string // HASH id -> "<delivery token>:<progress>"
}

// LifeKeysFor returns the life keys of slot index of the topic named
// topicName under prefix.
func LifeKeysFor(prefix, topicName string, index int) LifeKeys {
	base := prefix + ":" + Tag(topicName, index) + ":"
	return LifeKeys{Done: base + "done", DoneQ: base + "doneq", Events: base + "events", Waiters: base + "waiters", Finish: base + "fin", Progress: base + "progress"}
}

// Slice returns the keys in the order the scripts take them.
func (k LifeKeys) Slice() [6]string {
	return [6]string{k.Done, k.DoneQ, k.Events, k.Waiters, k.Finish, k.Progress}
}

// LifeSettingsKey is the HASH of topics' stored life settings: name ->
// "retention=<ms> events=<n>" (internal/life.Settings). The value stored
// wins over a consumer's options, as the limits do.
func LifeSettingsKey(prefix string) string { return prefix + ":life" }
