package keyspace

// TreeKeys are a topic slot's keys for flows (producer.SendFlow:
// parents that run after their children; docs/flows.md), in the slot's
// hash tag. A parent's own record is a key per parent (TreeRecordKey).
type TreeKeys struct {
	// Up is the HASH child id -> "<parent ref>" of the slot's flow
	// children whose final outcome has not reached their parent's record
	// yet: the watch list the reconciler reads after a crash.
	Up string
	// StageQ is the ZSET "l:<id>" / "r:<id>" -> ms it was staged: leaves
	// and parent records a SendFlow wrote but has not activated yet.
	StageQ string
	// Staged is the HASH id -> a staged leaf's send (flowstage.lua).
	Staged string
}

// TreeKeysFor returns the flow keys of slot index of the topic named
// topicName under prefix.
func TreeKeysFor(prefix, topicName string, index int) TreeKeys {
	base := prefix + ":" + Tag(topicName, index) + ":"
	return TreeKeys{Up: base + "flup", StageQ: base + "flstq", Staged: base + "flstg"}
}

// TreeRecordKey is the HASH of the flow parent id of slot index of the
// topic named topicName: its children, their outcomes and, until it is
// released, its envelope (luascripts/flowrec.lua lists the fields).
func TreeRecordKey(prefix, topicName string, index int, id string) string {
	return prefix + ":" + Tag(topicName, index) + ":fl:" + id
}

// SlotKeysFor returns the keys of slot index of the topic named topicName
// (KeysFor, for a caller that knows the name only).
func SlotKeysFor(prefix, topicName string, index int) Keys {
	base := prefix + ":" + Tag(topicName, index) + ":"
	return Keys{Store: base + keySuffixes[0], Prepare: base + keySuffixes[1], Dead: base + keySuffixes[2], Msg: base + keySuffixes[3],
		DeadMsg: base + keySuffixes[4], Wake: base + keySuffixes[5], Delayed: base + keySuffixes[6]}
}
