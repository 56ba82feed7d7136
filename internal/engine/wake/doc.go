// Package wake is the client's one subscription to the wake channels of
// every topic (Hub), with the shard waker that keeps it on a Redis Cluster
// (ShardWaker), and the pauser that reads topics' pause states for it.
// Engines take part through their waker (Target).
package wake
