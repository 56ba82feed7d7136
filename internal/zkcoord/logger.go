package zkcoord

import (
	"fmt"
	"strings"
)

// zkLogger sends go-zookeeper's log lines to the coordinator's logger and
// learns the session timeout the server granted from its "authenticated"
// line (go-zookeeper does not export it).
type zkLogger struct{ z *Coordinator }

func (l zkLogger) Printf(format string, args ...any) {
	if strings.HasPrefix(format, "authenticated: id=%d, timeout=%d") && len(args) == 2 {
		if ms, ok := args[1].(int32); ok && ms > 0 {
			l.z.sess.granted.Store(int64(ms))
		}
	}
	l.z.log.Debug("zk: " + fmt.Sprintf(format, args...))
}
