package producer

import "time"

// SetRedefineInterval changes how often p re-checks stored topic
// definitions (redefineInterval), so a test need not wait 10 s. Call it
// while no send is running.
func SetRedefineInterval(p *Producer, d time.Duration) { p.redefineEvery = d }
