package scripts_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Token -1 (the nack by id) rolls back whatever delivery of the id is
// current, and refuses, changing nothing, an id with no delivery in flight
// or only a removed delivery's tombstone.
func TestRollbackCurrentDelivery(t *testing.T) {
	s := newSlot(t, 3)
	assert.EqualValues(t, 0, s.rollbackHow(16, 0, "none", -1, ""), "unknown id")

	s.send("a", past(), "x")
	_, got := s.fetch(1, 30)
	assert.Equal(t, "a", got[0].id)
	assert.EqualValues(t, 4, s.rollbackHow(16, 0, "a", -1, ""), "retried")
	assert.Equal(t, where{store: true, msg: true}, s.where("a"))
	assert.Equal(t, 1, s.envelope(s.k.Msg, "a").Failures)
	assert.EqualValues(t, 0, s.rollbackHow(16, 0, "a", -1, ""), "no delivery in flight")

	_, got = s.fetch(1, 30)
	assert.Equal(t, "a", got[0].id)
	assert.EqualValues(t, 3, s.rollbackHow(16, 0, "a", -1, "d"), "dead")
	assert.Equal(t, where{dead: true, deadmsg: true}, s.where("a"))

	s.send("b", past(), "x")
	_, got = s.fetch(1, 30)
	assert.Equal(t, "b", got[0].id)
	assert.EqualValues(t, 4, s.remove("b"))
	assert.EqualValues(t, 0, s.rollbackHow(16, 0, "b", -1, ""), "a tombstone")
	assert.Equal(t, where{prepare: true}, s.where("b"), "the tombstone is left to the sweeper")
}
