package dashboard

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/rmq"
)

// Acks and nacks by id (rmqd's HTTP acks: rmq.ByIDObserver) are counted as
// the pushed deliveries' outcomes are.
func TestCountersCountEndsByID(t *testing.T) {
	c := NewCounters()
	var _ rmq.ByIDObserver = c
	c.EndedByID("q", consumer.Acked)
	c.EndedByID("q", consumer.Acked)
	c.EndedByID("q", consumer.Retried)
	c.EndedByID("q", consumer.Dead)
	c.EndedByID("q", consumer.Cancelled)
	assert.Equal(t, counts{Acked: 2, Retried: 1, Dead: 1}, c.snapshot("q"))
}
