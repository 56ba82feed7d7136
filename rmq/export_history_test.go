package rmq

import "time"

// HistoryTimings sets the client's history flush interval and worker
// record TTL (defaults 10 s and 30 s): tests shorten them so they need
// not wait that long. Test-only, so it is no part of the API.
func HistoryTimings(interval, workerTTL time.Duration) Option {
	return clientOption(func(c *config) { c.historyInterval, c.workerTTL = interval, workerTTL })
}

// FlushHistory asks c's history goroutine for a flush now and returns the
// number of flushes that succeeded before it.
func FlushHistory(c *Client) int64 {
	if c.obs.hist == nil {
		return 0
	}
	n := c.obs.hist.R.Flushes()
	c.obs.hist.R.Flush()
	return n
}

// HistoryFlushes returns how many of c's history flushes succeeded and
// failed.
func HistoryFlushes(c *Client) (ok, failed int64) {
	if c.obs.hist == nil {
		return 0, 0
	}
	return c.obs.hist.R.Flushes(), c.obs.hist.R.Failed()
}

// WorkerID returns the id of c's worker record ("" when it keeps none).
func WorkerID(c *Client) string {
	if c.obs.hist == nil {
		return ""
	}
	return c.obs.hist.R.WorkerID()
}
