package producer

import "time"

// SetRedefineInterval changes how often p re-checks stored topic
// definitions (redefineInterval), so a test need not wait 10 s. Call it
// while no send is running.
func SetRedefineInterval(p *Producer, d time.Duration) { p.redefineEvery = d }

// Queued is how many messages wait for a flush of p (none of the flushes
// in flight), for a test to know its sends have queued.
func Queued(p *Producer) int { return p.gc.Queued() }

// ExpireDefinitionChecks makes the next definition check of every topic p
// sends to due, as if its interval had passed since the last one.
func ExpireDefinitionChecks(p *Producer) {
	p.defined.Range(func(_, v any) bool {
		v.(*definedTopic).checked.Store(0)
		return true
	})
}
