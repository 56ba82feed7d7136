package main

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"
)

// lmstfy's name rules (LMSTFY-API.md §2): namespaces and queues are
// [-_A-Za-z0-9]+, at most 255 bytes, and a queue must not start with '_'.
// The consume route is laxer: see consumeQueues.
const maxNameLength = 255

// nameErr is the 400 text of a name-rule violation, "" when both are fine.
func nameErr(ns, q string) string {
	switch {
	case len(ns) > maxNameLength || len(q) > maxNameLength:
		return "namespace or queue name too long"
	case !validName(ns):
		return "namespace name contains forbidden characters"
	case !validName(q) || q[0] == '_':
		return "queue name contains forbidden characters"
	}
	return ""
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) {
			return false
		}
	}
	return true
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// consumeQueues splits the queue part of a consume path ("q1,q2"): every
// byte must be a name byte or a comma, empty pieces are skipped, and no
// length limit or '_' rule applies (lmstfy checks less on this route).
// It returns nil when nothing valid is left.
func consumeQueues(s string) []string {
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) && s[i] != ',' {
			return nil
		}
	}
	var qs []string
	for _, q := range strings.Split(s, ",") {
		if q != "" {
			qs = append(qs, q)
		}
	}
	return qs
}

// topicName maps (namespace, queue) to the RMQ topic that holds the queue.
// Topic names are [A-Za-z0-9._-]{1,128}; lmstfy names never contain '.',
// so "NS.Q" has exactly one dot and is reversible and collision-free.
// When it would exceed 128 bytes the name is '.' followed by a hash of both
// parts: it cannot be read as NS.Q (a namespace is never empty), and the
// queue registry keeps the way back (queueRegistry.rememberLong).
func topicName(ns, q string) string {
	if len(ns)+1+len(q) <= maxTopicName {
		return ns + "." + q
	}
	sum := sha256.Sum256([]byte(ns + "\x00" + q))
	return "." + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:]))
}

// maxTopicName is topic.MaxNameLength, restated so names.go stays free of
// the library.
const maxTopicName = 128

// splitTopicName is the inverse of topicName for the short form. ok is
// false for hashed names and for topics rmqd did not make.
func splitTopicName(name string) (ns, q string, ok bool) {
	ns, q, ok = strings.Cut(name, ".")
	if !ok || !validName(ns) || q == "" || strings.Contains(q, ".") {
		return "", "", false
	}
	for i := 0; i < len(q); i++ {
		if !nameByte(q[i]) {
			return "", "", false
		}
	}
	return ns, q, true
}

// isLongTopicName reports whether name is a hashed topicName.
func isLongTopicName(name string) bool { return strings.HasPrefix(name, ".") }
