// Package wake keeps the client's wake-up subscriptions on a Redis Cluster
// (ShardWaker): one sharded subscription connection per master, which
// follows the cluster's slot map and tells its Listener what it heard.
package wake
