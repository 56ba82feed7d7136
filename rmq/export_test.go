package rmq

import (
	"github.com/rmq-go/rmq/consumer"

	"net"
	"time"
)

// ZKDialer sets how TCP connections to ZooKeeper are opened (default
// net.DialTimeout): tests cut the network with it. Test-only, so it is no
// part of the API.
func ZKDialer(dial func(network, address string, timeout time.Duration) (net.Conn, error)) ZooKeeperOption {
	return func(z *zkOptions) { z.dialer = dial }
}

// PullEngineOptions gives the client's pull engines consumer options (a
// shorter prepare timeout, say). Test-only, so it is no part of the API.
func PullEngineOptions(opts ...consumer.Option) Option {
	return clientOption(func(c *config) { c.pullOptions = append(c.pullOptions, opts...) })
}

// PullLimits returns the limits c's pull engine of topicName has in force
// (the zero Limits when it has none).
func PullLimits(c *Client, topicName string) Limits {
	c.mu.Lock()
	e := c.pulls.byTopic[topicName]
	c.mu.Unlock()
	if e == nil || e.p == nil {
		return Limits{}
	}
	return Limits(e.p.Limits())
}
