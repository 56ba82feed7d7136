package rmq

import (
	"net"
	"time"
)

// ZKDialer sets how TCP connections to ZooKeeper are opened (default
// net.DialTimeout): tests cut the network with it. Test-only, so it is no
// part of the API.
func ZKDialer(dial func(network, address string, timeout time.Duration) (net.Conn, error)) ZooKeeperOption {
	return func(z *zkOptions) { z.dialer = dial }
}
