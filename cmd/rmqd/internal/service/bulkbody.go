package service

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
)

// A bulk publish holds its body (up to 64 MiB), then the library's
// encoding of each job, then the Redis command: one took rmqd from 24 to
// 252 MB, four at once to 842 MB. splitArray keeps the jobs as slices of
// the body (json.Unmarshal into json.RawMessage copied each one), the body
// is read into one buffer of its declared size (io.ReadAll doubled its way
// up), and bodyBudget bounds the bulk bodies being handled at once.

// errNotArray: the body is not a JSON array ("null" included).
var errNotArray = errors.New("not a JSON array")

// SplitArray returns the elements of the JSON array raw as sub-slices of
// raw (no copy), each without the white space around it.
func SplitArray(raw []byte) ([][]byte, error) {
	if !json.Valid(raw) {
		return nil, errNotArray
	}
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, errNotArray
	}
	i = skipSpace(raw, i+1)
	elems := [][]byte{}
	if raw[i] == ']' {
		return elems, nil
	}
	for {
		start := i
		depth, inString := 0, false
		for ; i < len(raw); i++ {
			c := raw[i]
			if inString {
				switch c {
				case '\\':
					i++
				case '"':
					inString = false
				}
				continue
			}
			switch c {
			case '"':
				inString = true
			case '[', '{':
				depth++
			case ']', '}':
				depth--
			}
			if depth < 0 || (depth == 0 && c == ',') {
				break
			}
		}
		end := i
		for end > start && isSpace(raw[end-1]) {
			end--
		}
		elems = append(elems, raw[start:end:end])
		if raw[i] == ']' {
			return elems, nil
		}
		i = skipSpace(raw, i+1) // past the comma
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// bodyBudget bounds the bytes of bulk bodies handled at once: a request
// waits for its turn (until its client gives up) rather than add its body
// to the others'. One body larger than the budget goes alone.
type bodyBudget struct {
	max int64

	mu      sync.Mutex
	used    int64
	changed chan struct{}
}

func newBodyBudget(max int64) *bodyBudget {
	return &bodyBudget{max: max, changed: make(chan struct{})}
}

// Acquire takes n bytes, waiting while others hold the budget.
func (b *bodyBudget) Acquire(ctx context.Context, n int64) error {
	if b.max <= 0 {
		return nil
	}
	for {
		b.mu.Lock()
		if b.used == 0 || b.used+n <= b.max {
			b.used += n
			b.mu.Unlock()
			return nil
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Release gives n bytes back.
func (b *bodyBudget) Release(n int64) {
	if b.max <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}
