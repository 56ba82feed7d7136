package keyspace_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/testkit/readmetest"
	"github.com/rmq-go/rmq/topic"
)

// The keys docs/cluster.md shows for slot 7 of topic orders (the block
// marked keys) are the ones KeysFor gives, hash tag and all.
func TestDocsKeyLayout(t *testing.T) {
	root, err := readmetest.Root()
	require.NoError(t, err)
	page, err := os.ReadFile(filepath.Join(root, "docs", "cluster.md"))
	require.NoError(t, err)
	fences, err := readmetest.Fences(page, readmetest.DocMarker)
	require.NoError(t, err)
	keys := keyspace.KeysFor("rmq", topic.MustNew("orders", topic.FixedTime, 16), 7)
	want := map[string]string{"store": keys.Store, "prepare": keys.Prepare, "dead": keys.Dead, "msg": keys.Msg,
		"deadmsg": keys.DeadMsg, "wake": keys.Wake, "delayed": keys.Delayed}
	tag := keys.Store[len("rmq:") : len(keys.Store)-len(":store")]
	shown := regexp.MustCompile(`^(rmq:\{orders:7:\d+\}):(\w+)\s`)
	checked := 0
	for _, f := range fences {
		if f.Name != "keys" {
			continue
		}
		for _, line := range strings.Split(f.Text, "\n") {
			m := shown.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			require.Equal(t, "rmq:"+tag, m[1], "docs/cluster.md: %s", line)
			if k, ok := want[m[2]]; ok {
				require.Equal(t, k, m[1]+":"+m[2], "docs/cluster.md: %s", line)
				checked++
			}
		}
	}
	require.Equal(t, len(want), checked, "docs/cluster.md shows every key of a slot")
}
