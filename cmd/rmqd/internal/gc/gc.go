package gc

import "runtime/debug"

// serverGCPercent is the GC target rmqd runs with unless GOGC says
// otherwise. Its live heap is a few MB, so with Go's default (collect when
// the heap has doubled, and at least every 4 MB) a busy rmqd collected
// several times a second, and the collections' fixed work and their mark
// workers took a tenth of its CPU; 400 lets the heap grow to five times
// what is live (tens of MB) between collections.
const serverGCPercent = 400

// Tune applies serverGCPercent when the environment sets no GOGC.
func Tune(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(serverGCPercent)
	}
}
