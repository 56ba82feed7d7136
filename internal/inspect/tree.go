package inspect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rmq-go/rmq/internal/flowtree"
	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/topic"
)

// The states of flow nodes (rmq.StateWaitingChildren, rmq.StateRemoved).
const (
	StateWaitingChildren MessageState = "waiting_children"
	StateRemoved         MessageState = "removed"
)

// FlowInfo is rmq.FlowInfo.
type FlowInfo struct {
	Node     MessageInfo
	Children []FlowInfo
}

// Tree is rmq.Inspector.Flow: the flow below id of t: the message, in any state
// (StateWaitingChildren while its children run), and its children, each a
// flow of its own. A finished child that its topic does not retain shows
// its outcome as its state (completed, dead, cancelled, removed) and its
// result. A message that is no parent has no children; an unknown id is
// ErrMessageNotFound.
func (i *Inspector) Tree(ctx context.Context, t topic.Topic, id string) (FlowInfo, error) {
	return i.flow(ctx, t, id, -1, nil, 0)
}

// flow is Flow for a node whose slot is known (slot >= 0) and whose
// outcome its parent recorded (out, nil when none).
func (i *Inspector) flow(ctx context.Context, t topic.Topic, id string, slot int, out *flowtree.Child, depth int) (FlowInfo, error) {
	var fi FlowInfo
	node, err := i.Message(ctx, t, id)
	switch {
	case err == nil:
		fi.Node = node
		slot = node.Slot
		if out != nil && node.State == StateInFlight {
			// Its outcome is in its parent's record, which it reaches
			// before its ack: the ack is on its way, the outcome decided.
			fi.Node.State, fi.Node.Result, fi.Node.LastError = MessageState(out.State), out.Result, out.Error
			if out.State == flowtree.Dead {
				fi.Node.State = StateDead
			}
		}
	case !errors.Is(err, ErrMessageNotFound):
		return FlowInfo{}, err
	case out != nil:
		// Finished and not retained: its parent's record tells.
		fi.Node = MessageInfo{ID: id, Topic: t, Slot: slot, State: MessageState(out.State), Result: out.Result, LastError: out.Error}
		if out.State == flowtree.Dead {
			fi.Node.State = StateDead
		}
	default:
		if slot < 0 {
			if slot, err = i.recordSlot(ctx, t, id); err != nil {
				return FlowInfo{}, err
			}
		}
		fi.Node = MessageInfo{ID: id, Topic: t, Slot: slot, State: StateWaitingChildren}
	}
	if slot < 0 || depth > 64 {
		return fi, nil
	}
	rec, err := flowtree.Read(ctx, i.rdb, i.prefix, t.Name(), slot, id)
	if errors.Is(err, flowtree.ErrNoRecord) {
		return fi, nil
	}
	if err != nil {
		return FlowInfo{}, err
	}
	if fi.Node.State == StateWaitingChildren && (rec.State == flowtree.Cancelled || rec.State == flowtree.Removed) {
		// Ended while it waited: its record says how.
		fi.Node.State = MessageState(rec.State)
	}
	if rec.State == flowtree.Waiting && fi.Node.State == StateWaitingChildren && len(rec.Env) > 0 {
		if e, err := scripts.DecodeEnvelope(rec.Env); err == nil {
			fillFromEnvelope(&fi.Node, e)
		}
	}
	topics := map[string]topic.Topic{t.Name(): t}
	for _, c := range rec.Children {
		ct, ok := topics[c.Topic]
		if !ok {
			if ct, err = i.Topic(ctx, c.Topic); err != nil {
				return FlowInfo{}, fmt.Errorf("rmq: flow child %s/%s: %w", c.Topic, c.ID, err)
			}
			topics[c.Topic] = ct
		}
		var o *flowtree.Child
		if c.Finished {
			o = &c
		}
		sub, err := i.flow(ctx, ct, c.ID, c.Slot, o, depth+1)
		if err != nil {
			return FlowInfo{}, err
		}
		fi.Children = append(fi.Children, sub)
	}
	return fi, nil
}

// recordSlot finds the slot of t that holds a record of parent id.
func (i *Inspector) recordSlot(ctx context.Context, t topic.Topic, id string) (int, error) {
	pipe := i.rdb.Pipeline()
	cmds := make([]interface{ Val() int64 }, t.SlotAmount())
	for s := range cmds {
		cmds[s] = pipe.Exists(ctx, keyspace.TreeRecordKey(i.prefix, t.Name(), s, id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return -1, fmt.Errorf("rmq: flow %s of %s: %w", id, t.Name(), err)
	}
	for s, c := range cmds {
		if c.Val() == 1 {
			return s, nil
		}
	}
	return -1, fmt.Errorf("%w: %s in %s", ErrMessageNotFound, id, t.Name())
}

// fillFromEnvelope sets what a waiting parent's envelope says.
func fillFromEnvelope(m *MessageInfo, e scripts.Envelope) {
	m.Body = e.Body
	m.Headers = e.Options.Headers
	m.MaxRetries = -1
	if e.Options.HasMaxRetries {
		m.MaxRetries = e.Options.MaxRetries
	}
	if e.Options.ExpiresAtMs > 0 {
		m.ExpiresAt = time.UnixMilli(e.Options.ExpiresAtMs)
	}
	m.Timeout = time.Duration(e.Options.TimeoutMs) * time.Millisecond
	m.FirstSentAt = time.UnixMilli(int64(e.FirstSentMs))
	if e.Type == 2 {
		m.Priority = int64(e.OrigScore)
	} else {
		m.Due = time.UnixMilli(int64(e.Score))
	}
}
