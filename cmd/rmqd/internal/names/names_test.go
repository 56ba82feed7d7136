package names

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/topic"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/params"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/redact"
)

func TestTopicNameIsValidReversibleAndDistinct(t *testing.T) {
	long := strings.Repeat("a", 255)
	cases := [][2]string{{"ns", "q"}, {"n-s_1", "Q_-9"}, {"a", "b"}, {long, "q"}, {"ns", long}, {long, long}, {long, long[:254]}}
	seen := map[string][2]string{}
	for _, c := range cases {
		name := TopicName(c[0], c[1])
		require.NoError(t, topic.ValidateName(name), "%q", name)
		if prev, dup := seen[name]; dup {
			t.Fatalf("%v and %v both map to %q", prev, c, name)
		}
		seen[name] = c
		ns, q, ok := SplitTopicName(name)
		if len(c[0])+1+len(c[1]) <= 128 {
			require.True(t, ok, name)
			require.Equal(t, c, [2]string{ns, q})
		} else {
			require.False(t, ok, name)
			require.True(t, IsLongTopicName(name))
		}
	}
	// A '.' never occurs in an lmstfy name, so "a.b" + "c" cannot meet
	// "a" + "b.c": the second is refused by the name rules.
	require.NotEmpty(t, NameErr("a", "b.c"))
	require.NotEmpty(t, NameErr("a.b", "c"))
	// Topics rmqd did not make are not read as queues.
	for _, name := range []string{"orders", "a.b.c", ".x", "a."} {
		_, _, ok := SplitTopicName(name)
		require.False(t, ok, name)
	}
}

func TestNameRules(t *testing.T) {
	long := strings.Repeat("x", 256)
	require.Equal(t, "", NameErr("ns", "q"))
	require.Equal(t, "", NameErr(long[:255], long[:255]))
	require.Equal(t, "namespace or queue name too long", NameErr(long, "q"))
	require.Equal(t, "namespace or queue name too long", NameErr("ns", long))
	require.Equal(t, "namespace name contains forbidden characters", NameErr("n s", "q"))
	require.Equal(t, "namespace name contains forbidden characters", NameErr("né", "q"))
	require.Equal(t, "queue name contains forbidden characters", NameErr("ns", "q.1"))
	require.Equal(t, "queue name contains forbidden characters", NameErr("ns", "_q"))
	require.Equal(t, "", NameErr("_ns", "q-_"))

	require.Equal(t, []string{"q1", "_q2", "q3"}, ConsumeQueues("q1,_q2,,q3,"))
	require.Equal(t, []string{"q2", "q1"}, ConsumeQueues("q2,q1,q2,,q1"))
	require.Equal(t, []string{long}, ConsumeQueues(long))
	require.Nil(t, ConsumeQueues(",,"))
	require.Equal(t, "", ConsumeNameErr("ns", "q1,_q2,,"+long))
	require.Equal(t, "", ConsumeNameErr("ns", ",,"), "checked later, after ttr, timeout and count")
	require.Equal(t, "queue name contains forbidden characters", ConsumeNameErr("ns", "q1;q2"))
	require.Equal(t, "queue name contains forbidden characters", ConsumeNameErr("ns", "q1,q.2"))
	require.Equal(t, "namespace name contains forbidden characters", ConsumeNameErr("n.s", "q;"))
}

func TestQueryUint(t *testing.T) {
	q, _ := url.ParseQuery("a=5&empty=&neg=-1&frac=1.5&junk=1x&plus=%2B1&big=4294967296&max=4294967295&space=%201")
	v, ok := params.QueryUint(q, "missing", 7, params.MaxUint32)
	require.True(t, ok)
	require.EqualValues(t, 7, v)
	v, ok = params.QueryUint(q, "a", 7, params.MaxUint32)
	require.True(t, ok)
	require.EqualValues(t, 5, v)
	v, ok = params.QueryUint(q, "max", 0, params.MaxUint32)
	require.True(t, ok)
	require.EqualValues(t, uint64(params.MaxUint32), v)
	for _, bad := range []string{"empty", "neg", "frac", "junk", "plus", "big", "space"} {
		_, ok := params.QueryUint(q, bad, 0, params.MaxUint32)
		require.False(t, ok, bad)
	}
}

func TestSplitToken(t *testing.T) {
	p, tok := SplitToken("abc")
	require.Equal(t, [2]string{DefaultPool, "abc"}, [2]string{p, tok})
	p, tok = SplitToken("other:abc")
	require.Equal(t, [2]string{"other", "abc"}, [2]string{p, tok})
	p, tok = SplitToken("default:abc")
	require.Equal(t, [2]string{DefaultPool, "abc"}, [2]string{p, tok})
}

func TestRedact(t *testing.T) {
	require.Equal(t, "redis://u:***@h:1/0", redact.Redact("redis://u:secret@h:1/0"))
	require.Equal(t, "redis://h:1/0", redact.Redact("redis://h:1/0"))
}
