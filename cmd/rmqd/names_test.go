package main

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/topic"
)

func TestTopicNameIsValidReversibleAndDistinct(t *testing.T) {
	long := strings.Repeat("a", 255)
	cases := [][2]string{{"ns", "q"}, {"n-s_1", "Q_-9"}, {"a", "b"}, {long, "q"}, {"ns", long}, {long, long}, {long, long[:254]}}
	seen := map[string][2]string{}
	for _, c := range cases {
		name := topicName(c[0], c[1])
		require.NoError(t, topic.ValidateName(name), "%q", name)
		if prev, dup := seen[name]; dup {
			t.Fatalf("%v and %v both map to %q", prev, c, name)
		}
		seen[name] = c
		ns, q, ok := splitTopicName(name)
		if len(c[0])+1+len(c[1]) <= 128 {
			require.True(t, ok, name)
			require.Equal(t, c, [2]string{ns, q})
		} else {
			require.False(t, ok, name)
			require.True(t, isLongTopicName(name))
		}
	}
	// A '.' never occurs in an lmstfy name, so "a.b" + "c" cannot meet
	// "a" + "b.c": the second is refused by the name rules.
	require.NotEmpty(t, nameErr("a", "b.c"))
	require.NotEmpty(t, nameErr("a.b", "c"))
	// Topics rmqd did not make are not read as queues.
	for _, name := range []string{"orders", "a.b.c", ".x", "a."} {
		_, _, ok := splitTopicName(name)
		require.False(t, ok, name)
	}
}

func TestNameRules(t *testing.T) {
	long := strings.Repeat("x", 256)
	require.Equal(t, "", nameErr("ns", "q"))
	require.Equal(t, "", nameErr(long[:255], long[:255]))
	require.Equal(t, "namespace or queue name too long", nameErr(long, "q"))
	require.Equal(t, "namespace or queue name too long", nameErr("ns", long))
	require.Equal(t, "namespace name contains forbidden characters", nameErr("n s", "q"))
	require.Equal(t, "namespace name contains forbidden characters", nameErr("né", "q"))
	require.Equal(t, "queue name contains forbidden characters", nameErr("ns", "q.1"))
	require.Equal(t, "queue name contains forbidden characters", nameErr("ns", "_q"))
	require.Equal(t, "", nameErr("_ns", "q-_"))

	require.Equal(t, []string{"q1", "_q2", "q3"}, consumeQueues("q1,_q2,,q3,"))
	require.Equal(t, []string{"q2", "q1"}, consumeQueues("q2,q1,q2,,q1"))
	require.Equal(t, []string{long}, consumeQueues(long))
	require.Nil(t, consumeQueues(",,"))
	require.Equal(t, "", consumeNameErr("ns", "q1,_q2,,"+long))
	require.Equal(t, "", consumeNameErr("ns", ",,"), "checked later, after ttr, timeout and count")
	require.Equal(t, "queue name contains forbidden characters", consumeNameErr("ns", "q1;q2"))
	require.Equal(t, "queue name contains forbidden characters", consumeNameErr("ns", "q1,q.2"))
	require.Equal(t, "namespace name contains forbidden characters", consumeNameErr("n.s", "q;"))
}

func TestQueryUint(t *testing.T) {
	q, _ := url.ParseQuery("a=5&empty=&neg=-1&frac=1.5&junk=1x&plus=%2B1&big=4294967296&max=4294967295&space=%201")
	v, ok := queryUint(q, "missing", 7, maxUint32)
	require.True(t, ok)
	require.EqualValues(t, 7, v)
	v, ok = queryUint(q, "a", 7, maxUint32)
	require.True(t, ok)
	require.EqualValues(t, 5, v)
	v, ok = queryUint(q, "max", 0, maxUint32)
	require.True(t, ok)
	require.EqualValues(t, uint64(maxUint32), v)
	for _, bad := range []string{"empty", "neg", "frac", "junk", "plus", "big", "space"} {
		_, ok := queryUint(q, bad, 0, maxUint32)
		require.False(t, ok, bad)
	}
}

func TestSplitToken(t *testing.T) {
	p, tok := splitToken("abc")
	require.Equal(t, [2]string{defaultPool, "abc"}, [2]string{p, tok})
	p, tok = splitToken("other:abc")
	require.Equal(t, [2]string{"other", "abc"}, [2]string{p, tok})
	p, tok = splitToken("default:abc")
	require.Equal(t, [2]string{defaultPool, "abc"}, [2]string{p, tok})
}

func TestRedact(t *testing.T) {
	require.Equal(t, "redis://u:***@h:1/0", redact("redis://u:secret@h:1/0"))
	require.Equal(t, "redis://h:1/0", redact("redis://h:1/0"))
}
