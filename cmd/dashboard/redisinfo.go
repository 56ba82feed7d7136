package dashboard

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// redisNode is what the overview shows of one Redis server.
type redisNode struct {
	Addr, Version         string
	UsedMemory, MaxMemory string // human-readable, as INFO gives them
	Policy                string // maxmemory-policy
	Err                   string
}

// Evicting reports whether Redis may evict keys, which loses messages.
func (n redisNode) Evicting() bool { return n.Policy != "" && n.Policy != "noeviction" }

// redisNodes reads INFO server and memory from the node, or from every
// master of a cluster.
func (h *handler) redisNodes(ctx context.Context) []redisNode {
	if cl, ok := h.rdb.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		var out []redisNode
		_ = cl.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			n := readNode(ctx, c, c.Options().Addr)
			mu.Lock()
			out = append(out, n)
			mu.Unlock()
			return nil
		})
		slices.SortFunc(out, func(a, b redisNode) int { return strings.Compare(a.Addr, b.Addr) })
		return out
	}
	addr := ""
	if c, ok := h.rdb.(*redis.Client); ok {
		addr = c.Options().Addr
	}
	return []redisNode{readNode(ctx, h.rdb, addr)}
}

func readNode(ctx context.Context, c redis.Cmdable, addr string) redisNode {
	n := redisNode{Addr: addr}
	info, err := c.Info(ctx, "server", "memory").Result()
	if err != nil {
		n.Err = err.Error()
		return n
	}
	for line := range strings.SplitSeq(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "redis_version":
			n.Version = v
		case "used_memory_human":
			n.UsedMemory = v
		case "maxmemory_human":
			n.MaxMemory = v
		case "maxmemory_policy":
			n.Policy = v
		}
	}
	return n
}
