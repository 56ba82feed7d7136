package zkcoord

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// This file reads a fleet's state for observers (the dashboard): it never
// writes and needs no registration, only a connection and the fleet's root.

// Member is a worker registered in a fleet, as its member node describes it.
type Member struct {
	ID     string
	Host   string
	PID    int
	Since  time.Time // when the member registered (its session began)
	Topics []string  // the topics it consumes
}

// CleanRoot checks a fleet root as New does and returns it without a
// trailing slash.
func CleanRoot(root string) (string, error) {
	r := strings.TrimSuffix(root, "/")
	if !strings.HasPrefix(r, "/") || path.Clean(r) != r || r == "/" {
		return "", fmt.Errorf("%w: root %q (want an absolute znode path like /rmq/app)", ErrInvalidConfig, root)
	}
	return r, nil
}

// ReadMembers returns the members registered under root, sorted by id; none
// when no worker ever coordinated there. A member whose data cannot be
// decoded is still listed, by id.
func ReadMembers(conn *zk.Conn, root string) ([]Member, error) {
	p := zkPaths{root: root}
	ids, _, err := conn.Children(p.members())
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("rmq: list fleet members: %w", err)
	}
	sort.Strings(ids)
	out := make([]Member, 0, len(ids))
	for _, id := range ids {
		data, _, err := conn.Get(p.member(id))
		if errors.Is(err, zk.ErrNoNode) {
			continue // its session ended since the listing
		}
		if err != nil {
			return nil, fmt.Errorf("rmq: read fleet member %s: %w", id, err)
		}
		m := Member{ID: id}
		var info struct {
			Host   string    `json:"host"`
			PID    int       `json:"pid"`
			Topics []string  `json:"topics"`
			Since  time.Time `json:"since"`
		}
		if json.Unmarshal(data, &info) == nil {
			m.Host, m.PID, m.Topics, m.Since = info.Host, info.PID, info.Topics, info.Since
		}
		out = append(out, m)
	}
	return out, nil
}

// ReadOwners returns the owner member id of every slot of a topic of
// slotAmount slots (index: slot; "" when nobody owns it). It reads the
// holders index, whose nodes are created and deleted with the owner nodes
// in one transaction, so one children read is a consistent picture. ok is
// false when no worker ever coordinated the topic under root.
func ReadOwners(conn *zk.Conn, root, topicName string, slotAmount int) (owners []string, ok bool, err error) {
	names, _, err := conn.Children(zkPaths{root: root}.holders(topicName))
	if errors.Is(err, zk.ErrNoNode) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("rmq: list slot owners of %s: %w", topicName, err)
	}
	owners = make([]string, slotAmount)
	for _, n := range names {
		s, member, valid := parseHolder(n)
		if valid && s < slotAmount {
			owners[s] = member
		}
	}
	return owners, true, nil
}
