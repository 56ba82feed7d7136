package rmq

// PullWakeups counts the waits of c's Pulls that a wake-up of one of their
// topics ended (not their wait running out).
func PullWakeups(c *Client) int64 { return c.pulls.count.Woken.Load() }

// PullFetches counts the engine fetches c's Pulls made.
func PullFetches(c *Client) int64 { return c.pulls.count.Fetches.Load() }
