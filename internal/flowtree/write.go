package flowtree

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
)

// Node is one node of a flow as it is written.
type Node struct {
	Topic string
	Slot  int
	ID    string
	Type  int    // 2 priority, 3 fixed-time
	Score string // the priority, or the due ms ("0": now)
	Opts  []byte // the options block, its Header included for a child
	Body  []byte
	Up    string // its parent's Ref.String(); "" for the root
	// Kids are a parent's children: "<F|C><slot>\n<topic>\n<id>" each.
	Kids []string
}

// Kid is the descriptor of a child in its parent's record.
func Kid(fail bool, topicName string, slot int, id string) string {
	f := "C"
	if fail {
		f = "F"
	}
	return f + strconv.Itoa(slot) + "\n" + topicName + "\n" + id
}

// ErrTaken is returned by Write when a node's id is taken: a parent
// record of another flow, or a leaf waiting or in flight. Nothing of the
// flow stays written.
var ErrTaken = errors.New("rmq: flow id taken")

type slotKey struct {
	topic string
	slot  int
}

// Write writes the flow nodes (nodes[0] the root) under a fresh nonce:
// every node staged, invisible, slot by slot; then the root's slot
// activated, which commits the flow; then every other slot activated. A
// failure before the commit discards what was staged (and a scan
// discards what a dead writer left); one after it leaves the flow
// committed, and a scan activates what is left (Reporter.Scan).
func Write(ctx context.Context, rdb redis.UniversalClient, prefix string, nodes []Node) error {
	began := time.Now()
	st, err := stage(ctx, rdb, prefix, nodes)
	if err != nil {
		return err
	}
	fid, order, members, discard := st.fid, st.order, st.members, st.discard
	if time.Since(began) > StageGrace {
		// A scan may take it for a dead writer's from now on: it is not
		// committed (scans discard only what is older than a few graces).
		discard()
		return errors.New("rmq: stage a flow: staging took longer than StageGrace; nothing was written")
	}
	wake := scripts.WakeCommand(rdb)
	// The commit: the root's slot, its record among its members.
	if err := Act(ctx, rdb, prefix, wake, order[0].topic, order[0].slot, "a", fid, members[0]); err != nil {
		if committed, cerr := Committed(context.WithoutCancel(ctx), rdb, prefix, nodes[0].Topic, nodes[0].Slot, nodes[0].ID, fid); cerr == nil && !committed {
			discard()
		}
		return fmt.Errorf("rmq: commit a flow: %w", err)
	}
	// A writer slower than StageGrace may find its flow discarded by a
	// scan: then nothing of it is live, and the commit above changed
	// nothing.
	if ok, err := Committed(ctx, rdb, prefix, nodes[0].Topic, nodes[0].Slot, nodes[0].ID, fid); err != nil || !ok {
		if err == nil {
			discard()
			err = errors.New("the flow was discarded before its commit (staging took longer than StageGrace)")
		}
		return fmt.Errorf("rmq: commit a flow: %w", err)
	}
	var act []scripts.Call
	for i := 1; i < len(order); i++ {
		act = append(act, actCall(prefix, wake, order[i].topic, order[i].slot, "a", fid, members[i]))
	}
	for _, cmd := range scripts.RunAll(ctx, rdb, act) {
		if err := cmd.Err(); err != nil {
			return fmt.Errorf("rmq: activate a flow (committed; a consumer's scan finishes it): %w", err)
		}
	}
	return nil
}

// staged is what stage wrote.
type staged struct {
	fid     string
	order   []slotKey
	members [][]string
	discard func()
}

// StageOnly is Write's first step alone (a writer that dies after it): the
// flow's nonce, nothing of it visible.
func StageOnly(ctx context.Context, rdb redis.UniversalClient, prefix string, nodes []Node) (string, error) {
	st, err := stage(ctx, rdb, prefix, nodes)
	return st.fid, err
}

// stage stages every node of the flow, slot by slot; on an error it
// discarded what it staged.
func stage(ctx context.Context, rdb redis.UniversalClient, prefix string, nodes []Node) (staged, error) {
	fid := scripts.Nonce()
	wake := scripts.WakeCommand(rdb)
	root := rootRef(nodes[0].Topic, nodes[0].Slot, nodes[0].ID)
	var order []slotKey
	by := map[slotKey][]Node{}
	for _, n := range nodes {
		k := slotKey{n.Topic, n.Slot}
		if _, ok := by[k]; !ok {
			order = append(order, k)
		}
		by[k] = append(by[k], n)
	}
	calls := make([]scripts.Call, len(order))
	members := make([][]string, len(order))
	for i, sk := range order {
		calls[i], members[i] = stageCall(prefix, wake, sk, by[sk], fid, root)
	}
	discard := func() {
		// Best effort: a scan discards what this leaves.
		dctx := context.WithoutCancel(ctx)
		for i, sk := range order {
			_ = Act(dctx, rdb, prefix, "", sk.topic, sk.slot, "x", fid, members[i])
		}
	}
	for _, cmd := range scripts.RunAll(ctx, rdb, calls) {
		res, err := cmd.Slice()
		if err != nil {
			discard()
			return staged{}, fmt.Errorf("rmq: stage a flow: %w", err)
		}
		if c, _ := res[0].(int64); c == -1 {
			discard()
			id, _ := res[1].(string)
			return staged{}, fmt.Errorf("%w: %s", ErrTaken, id)
		}
	}
	return staged{fid: fid, order: order, members: members, discard: discard}, nil
}

// stageCall is flowstage.lua's call for the nodes of one slot, and the
// members it stages.
func stageCall(prefix, wake string, sk slotKey, ns []Node, fid, root string) (scripts.Call, []string) {
	k := keyspace.SlotKeysFor(prefix, sk.topic, sk.slot)
	tk := keyspace.TreeKeysFor(prefix, sk.topic, sk.slot)
	keys := []string{tk.StageQ, tk.Staged, k.Msg, k.Wake}
	var parents, leaves []any
	var pm, lm []string
	np := 0
	for _, n := range ns {
		if len(n.Kids) > 0 {
			np++
			keys = append(keys, keyspace.TreeRecordKey(prefix, sk.topic, sk.slot, n.ID))
			parents = append(parents, n.ID, n.Type, n.Score, n.Opts, n.Body, n.Up, len(n.Kids))
			for _, kd := range n.Kids {
				parents = append(parents, kd)
			}
			pm = append(pm, "r:"+n.ID)
		} else {
			leaves = append(leaves, n.ID, n.Type, n.Score, n.Opts, n.Body, n.Up)
			lm = append(lm, "l:"+n.ID)
		}
	}
	args := append([]any{wake, fid, root, np, len(ns) - np}, parents...)
	args = append(args, leaves...)
	return scripts.Call{Script: scripts.FlowStage, Keys: keys, Args: args}, append(pm, lm...)
}

// actCall is flowact.lua's call for members of one slot.
func actCall(prefix, wake, topicName string, slot int, mode, fid string, members []string) scripts.Call {
	k := keyspace.SlotKeysFor(prefix, topicName, slot)
	tk := keyspace.TreeKeysFor(prefix, topicName, slot)
	gk := keyspace.GroupKeysForName(prefix, topicName, slot)
	keys := []string{tk.StageQ, tk.Staged, tk.Up, k.Store, k.Prepare, k.Msg, k.Wake, k.Delayed, gk.Queue, gk.Turn}
	args := []any{mode, fid, wake}
	for _, m := range members {
		if len(m) > 2 && m[:2] == "r:" {
			keys = append(keys, keyspace.TreeRecordKey(prefix, topicName, slot, m[2:]))
		}
		args = append(args, m)
	}
	return scripts.Call{Script: scripts.FlowAct, Keys: keys, Args: args}
}

// Act activates (mode "a") or discards ("x") the staged members of flow
// fid in slot of the topic named topicName.
func Act(ctx context.Context, rdb redis.UniversalClient, prefix, wake, topicName string, slot int, mode, fid string, members []string) error {
	if len(members) == 0 {
		return nil
	}
	c := actCall(prefix, wake, topicName, slot, mode, fid, members)
	if err := c.Script.Run(ctx, rdb, c.Keys, c.Args...).Err(); err != nil {
		return fmt.Errorf("rmq: activate flow nodes of %s slot %d: %w", topicName, slot, err)
	}
	return nil
}

// Committed reports whether flow fid, whose root is id of slot of the
// topic named topicName, was committed: the root's record is the flow's
// and no longer staged.
func Committed(ctx context.Context, rdb redis.UniversalClient, prefix, topicName string, slot int, id, fid string) (bool, error) {
	v, err := rdb.HMGet(ctx, keyspace.TreeRecordKey(prefix, topicName, slot, id), "fid", "stg").Result()
	if err != nil {
		return false, fmt.Errorf("rmq: read the root record of %s/%s: %w", topicName, id, err)
	}
	f, _ := v[0].(string)
	return f == fid && v[1] == nil, nil
}
