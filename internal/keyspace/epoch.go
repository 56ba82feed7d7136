package keyspace

// EpochKey is the STRING holding the owner epoch of slot index of a topic
// (ZooKeeper mode), next to the slot's other keys and in its hash tag, so
// the fenced scripts touch one cluster slot. A slot's owner raises it when
// its term starts (takeover.lua) and every fetch, ack, rollback, lease
// extension and sweep of that owner names it; Redis refuses the call once a
// newer owner raised it.
func EpochKey(prefix, topicName string, index int) string {
	return prefix + ":" + Tag(topicName, index) + ":epoch"
}

// EpochKeys returns EpochKey for every slot of a topic of slotAmount slots.
func EpochKeys(prefix, topicName string, slotAmount int) []string {
	out := make([]string, slotAmount)
	for i := range out {
		out[i] = EpochKey(prefix, topicName, i)
	}
	return out
}
