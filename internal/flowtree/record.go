package flowtree

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/keyspace"
)

// Child is one child as its parent's record holds it.
type Child struct {
	Index int
	Topic string
	Slot  int
	ID    string
	Fail  bool // its failure fails the parent (producer.FailParent)
	// Finished: the outcome below is recorded; Seq is its place in the
	// order the children finished (1 first).
	Finished bool
	Seq      int
	State    string
	Error    string
	Result   []byte
}

// The states of a record.
const (
	Waiting  = "waiting"  // for its children
	Released = "released" // in store: deliverable, running or finished
	Failed   = "failed"   // moved to the dead queue by a child's failure
	// A record may also be Cancelled or Removed (ref.go's names): ended
	// while it waited (flowend.lua); its children's outcomes are still
	// recorded, and release nothing.
)

// Record is a parent's record.
type Record struct {
	ID       string
	State    string
	Staged   bool // written by a SendFlow that has not activated it yet
	Up       string
	Env      []byte  // the parent's envelope while it waits
	Children []Child // by index
}

// ErrNoRecord is returned by Read for an id that has no record: not a
// parent, or one whose record lapsed.
var ErrNoRecord = errors.New("rmq: no flow record")

// Read returns the record of parent id of slot of the topic named
// topicName.
func Read(ctx context.Context, rdb redis.UniversalClient, prefix, topicName string, slot int, id string) (Record, error) {
	f, err := rdb.HGetAll(ctx, keyspace.TreeRecordKey(prefix, topicName, slot, id)).Result()
	if err != nil {
		return Record{}, fmt.Errorf("rmq: read the flow record of %s/%s: %w", topicName, id, err)
	}
	if len(f) == 0 {
		return Record{}, ErrNoRecord
	}
	return parseRecord(f)
}

func parseRecord(f map[string]string) (Record, error) {
	r := Record{ID: f["id"], Up: f["up"], Staged: f["stg"] != "", Env: []byte(f["env"])}
	switch f["st"] {
	case "r":
		r.State = Released
	case "x":
		r.State = Failed
	case "c":
		r.State = Cancelled
	case "m":
		r.State = Removed
	default:
		r.State = Waiting
	}
	n, err := strconv.Atoi(f["n"])
	if err != nil {
		return Record{}, fmt.Errorf("rmq: a flow record without its count of children")
	}
	r.Children = make([]Child, n)
	for i := range r.Children {
		c := &r.Children[i]
		c.Index = i + 1
		k := f["k"+strconv.Itoa(i+1)]
		// "<F|C><slot>\n<topic>\n<id>"
		if len(k) > 0 {
			c.Fail = k[0] == 'F'
			slot, rest, _ := strings.Cut(k[1:], "\n")
			c.Slot, _ = strconv.Atoi(slot)
			c.Topic, c.ID, _ = strings.Cut(rest, "\n")
		}
		if o, ok := f["o"+strconv.Itoa(i+1)]; ok {
			parseOutcome(c, o)
		}
	}
	return r, nil
}

// parseOutcome reads "<seq> <state> <errLen> <err><result>" into c.
func parseOutcome(c *Child, o string) {
	seq, rest, _ := strings.Cut(o, " ")
	st, rest, _ := strings.Cut(rest, " ")
	el, rest, _ := strings.Cut(rest, " ")
	n, _ := strconv.Atoi(el)
	n = min(max(n, 0), len(rest))
	c.Finished = true
	c.Seq, _ = strconv.Atoi(seq)
	if len(st) > 0 {
		c.State = stateOf(st[0])
	}
	c.Error = rest[:n]
	if len(rest) > n {
		c.Result = []byte(rest[n:])
	}
}

// Finished returns the finished children of r in the order they finished.
func (r Record) Finished() []Child {
	var out []Child
	for _, c := range r.Children {
		if c.Finished {
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Seq < out[b].Seq })
	return out
}
