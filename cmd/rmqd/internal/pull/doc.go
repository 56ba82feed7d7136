// Package pull is rmqd's view of one Redis deployment (a pool): its RMQ
// client, the jobs API over it, the publisher that gathers single
// publishes, the pull rounds that gather consumes, the watch of queues
// that do not exist yet, and the pool's forwards and quota bookkeeping.
package pull
