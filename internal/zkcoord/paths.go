package zkcoord

import (
	"strconv"
	"strings"
)

// ZooKeeper layout under the coordinator's root R (default "/rmq/<prefix>"):
//
//	R/members/<member>                 ephemeral: one per worker session (data: host, pid, topics)
//	R/topics/<topic>                   persistent: the topic's definition ("fixedtime:64")
//	R/topics/<topic>/members/<member>  ephemeral: the workers that consume the topic
//	R/topics/<topic>/owners/<slot>     ephemeral: the slot's owner (data: member); creating it claims the slot
//	R/topics/<topic>/holders/<slot>-<member>  ephemeral: created and deleted with the owner node in one
//	                                   transaction, so one children read shows who owns what
//
// A member id is a fresh UUID per ZooKeeper session, so a request of an
// older session can never touch the nodes of a newer one.
type zkPaths struct{ root string }

func (p zkPaths) members() string          { return p.root + "/members" }
func (p zkPaths) member(id string) string  { return p.root + "/members/" + id }
func (p zkPaths) topics() string           { return p.root + "/topics" }
func (p zkPaths) topic(name string) string { return p.root + "/topics/" + name }

func (p zkPaths) topicMembers(name string) string    { return p.topic(name) + "/members" }
func (p zkPaths) topicMember(name, id string) string { return p.topicMembers(name) + "/" + id }
func (p zkPaths) owners(name string) string          { return p.topic(name) + "/owners" }
func (p zkPaths) owner(name string, slot int) string {
	return p.owners(name) + "/" + strconv.Itoa(slot)
}
func (p zkPaths) holders(name string) string { return p.topic(name) + "/holders" }
func (p zkPaths) holder(name string, slot int, id string) string {
	return p.holders(name) + "/" + strconv.Itoa(slot) + "-" + id
}

// parseHolder splits a holders child name "<slot>-<member>".
func parseHolder(name string) (slot int, member string, ok bool) {
	s, m, ok := strings.Cut(name, "-")
	if !ok || m == "" {
		return 0, "", false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, "", false
	}
	return n, m, true
}
