// Package metrics counts rmqd's requests and jobs and writes them in the
// Prometheus text format.
package metrics
