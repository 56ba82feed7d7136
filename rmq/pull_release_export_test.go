package rmq

// PullEngines counts c's pull engines (started or starting).
func PullEngines(c *Client) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pulls.byTopic)
}
