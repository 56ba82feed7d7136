// Package zkfleet holds the fleet tests of ZooKeeper mode (rmq.WithZooKeeper):
// worker OS processes (the test binary re-executed in a worker role) consume
// one topic through a real redis-server and a real ZooKeeper while the test
// kills, freezes, adds workers and restarts ZooKeeper, then checks from the
// workers' records that every key's messages were handled once each, in
// order, never two at a time, and never by two owners of a slot at once.
//
// It has no code outside its tests.
package zkfleet
