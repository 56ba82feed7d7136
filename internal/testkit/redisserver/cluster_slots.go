package redisserver

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// slotRange is one range of hash slots with the master that serves it and
// its replicas sorted, so views from different nodes compare equal.
type slotRange struct {
	start, end int
	master     string
	replicas   []string
}

type slotView []slotRange

// slotView reads CLUSTER SHARDS from the node at addr: one range per row of
// a shard, with the shard's master and the replicas that are not failed
// (the nodes CLUSTER SLOTS, deprecated since Redis 7.0, would list).
func (c *Cluster) slotView(ctx context.Context, addr string) (slotView, error) {
	shards, err := c.client(addr).ClusterShards(ctx).Result()
	if err != nil {
		return nil, err
	}
	var v slotView
	for _, sh := range shards {
		master := ""
		var replicas []string
		for _, n := range sh.Nodes {
			a := net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))
			switch {
			case n.Role == "master":
				master = a
			case n.Health != "failed":
				replicas = append(replicas, a)
			}
		}
		if master == "" {
			continue
		}
		slices.Sort(replicas)
		for _, r := range sh.Slots {
			v = append(v, slotRange{start: int(r.Start), end: int(r.End), master: master, replicas: slices.Clone(replicas)})
		}
	}
	slices.SortFunc(v, func(a, b slotRange) int { return a.start - b.start })
	return v, nil
}

func (v slotView) String() string {
	var b strings.Builder
	for _, r := range v {
		fmt.Fprintf(&b, "%d-%d:%s%v ", r.start, r.end, r.master, r.replicas)
	}
	return b.String()
}

// covered reports whether the ranges cover every slot exactly once.
func (v slotView) covered() bool {
	next := 0
	for _, r := range v {
		if r.start != next {
			return false
		}
		next = r.end + 1
	}
	return next == NumSlots
}

func (v slotView) masters() []string {
	var m []string
	for _, r := range v {
		if !slices.Contains(m, r.master) {
			m = append(m, r.master)
		}
	}
	slices.Sort(m)
	return m
}

func (v slotView) owner(slot int) string {
	for _, r := range v {
		if slot >= r.start && slot <= r.end {
			return r.master
		}
	}
	return ""
}
