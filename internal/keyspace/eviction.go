package keyspace

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// EvictionPolicy returns Redis's maxmemory-policy: anything but
// "noeviction" may evict a store or msg key and silently lose messages. It
// reads INFO memory rather than CONFIG GET: a least-privilege ACL user may
// run INFO, while CONFIG GET would also hand it every password in the
// configuration.
func EvictionPolicy(ctx context.Context, rdb redis.UniversalClient) (string, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "maxmemory_policy:"); ok {
			return v, nil
		}
	}
	return "", errors.New("no maxmemory_policy in INFO memory")
}
