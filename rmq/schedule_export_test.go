package rmq

// SchedulerRolled returns a channel closed after the client's scheduler's
// next round of rolls (nil without a scheduler): tests wait on it.
func SchedulerRolled(c *Client) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sched.sched == nil {
		return nil
	}
	return c.sched.sched.Rolled()
}
