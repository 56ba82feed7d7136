package names

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"

	"github.com/rmq-go/rmq/producer"
)

// lmstfy's name rules (LMSTFY-API.md §2): namespaces and queues are
// [-_A-Za-z0-9]+, at most 255 bytes, and a queue must not start with '_'.
// The consume route is laxer: see consumeQueues.
const MaxNameLength = 255

// NameErr is the 400 text of a name-rule violation, "" when both are fine.
func NameErr(ns, q string) string {
	switch {
	case len(ns) > MaxNameLength || len(q) > MaxNameLength:
		return "namespace or queue name too long"
	case !ValidName(ns):
		return "namespace name contains forbidden characters"
	case !ValidName(q) || q[0] == '_':
		return "queue name contains forbidden characters"
	}
	return ""
}

func ValidName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !NameByte(s[i]) {
			return false
		}
	}
	return true
}

func NameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// ConsumeNameErr is nameErr for the consume route ("q1,q2"), which checks
// less: the namespace as usual, the queue part only for its bytes (name
// bytes and commas; no length limit, '_' allowed).
func ConsumeNameErr(ns, qs string) string {
	if !ValidName(ns) {
		return "namespace name contains forbidden characters"
	}
	for i := 0; i < len(qs); i++ {
		if !NameByte(qs[i]) && qs[i] != ',' {
			return "queue name contains forbidden characters"
		}
	}
	return ""
}

// ConsumeQueues splits the queue part of a consume path ("q1,q2") that
// consumeNameErr accepted; empty pieces and repeats are skipped (the first
// place of a name is its priority). It returns nil when nothing is left.
func ConsumeQueues(s string) []string {
	if s != "" && strings.IndexByte(s, ',') < 0 {
		return []string{s} // one queue: the common case
	}
	var qs []string
	seen := map[string]bool{}
	for q := range strings.SplitSeq(s, ",") {
		if q != "" && !seen[q] {
			seen[q] = true
			qs = append(qs, q)
		}
	}
	return qs
}

// TopicName maps (namespace, queue) to the RMQ topic that holds the queue.
// Topic names are [A-Za-z0-9._-]{1,128}; lmstfy names never contain '.',
// so "NS.Q" has exactly one dot and is reversible and collision-free.
// When it would exceed 128 bytes the name is '.' followed by a hash of both
// parts: it cannot be read as NS.Q (a namespace is never empty), and the
// queue registry keeps the way back (queueRegistry.rememberLong).
func TopicName(ns, q string) string {
	if len(ns)+1+len(q) <= maxTopicName {
		return ns + "." + q
	}
	sum := sha256.Sum256([]byte(ns + "\x00" + q))
	return "." + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:]))
}

// maxTopicName is topic.MaxNameLength, restated so names.go stays free of
// the library.
const maxTopicName = 128

// SplitTopicName is the inverse of topicName for the short form. ok is
// false for hashed names and for topics rmqd did not make.
func SplitTopicName(name string) (ns, q string, ok bool) {
	ns, q, ok = strings.Cut(name, ".")
	if !ok || !ValidName(ns) || q == "" || strings.Contains(q, ".") {
		return "", "", false
	}
	for i := 0; i < len(q); i++ {
		if !NameByte(q[i]) {
			return "", "", false
		}
	}
	return ns, q, true
}

// IsLongTopicName reports whether name is a hashed topicName.
func IsLongTopicName(name string) bool { return strings.HasPrefix(name, ".") }

// SplitToken splits "[pool:]token"; without a prefix the pool is default.
func SplitToken(s string) (pool, token string) {
	if p, t, ok := strings.Cut(s, ":"); ok {
		return p, t
	}
	return DefaultPool, s
}

const DefaultPool = "default"

// EmptyHeader marks a job whose body is empty: the library refuses empty
// bodies and lmstfy allows them, so rmqd stores one space and this header.
// HTTP header names cannot contain ':', so no Job-Attr-* attribute can
// collide with it; it is never shown as an attribute.
const EmptyHeader = "rmqd:empty"

// ValidGroup checks a publish's ?group= ([A-Za-z0-9._:-]{1,128}, as
// producer.WithGroup).
func ValidGroup(s string) bool {
	if s == "" || len(s) > producer.MaxGroupLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !NameByte(s[i]) && s[i] != '.' && s[i] != ':' {
			return false
		}
	}
	return true
}
