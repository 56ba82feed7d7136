package rmq_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/slots"
)

// Stats counts a topic's retained finished messages (completed and
// cancelled records) and its event logs' entries, in total and per slot.
func TestStatsRetainedAndEvents(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		r := newLifeRig(t, e, "kept", 4, rmq.Lifecycle{Retention: time.Minute, Events: 100})
		st, err := r.insp.Stats(ctx, r.tp)
		require.NoError(t, err)
		assert.Zero(t, st.Retained)
		assert.Zero(t, st.Events)

		for _, id := range []string{"a", "b"} {
			send(t, r.c.Producer(), r.tp, id, "body-"+id)
			ok, err := r.insp.Cancel(ctx, r.tp, id)
			require.NoError(t, err)
			require.True(t, ok)
		}
		r.complete("c", r.sendAndFetch("c"), "done")
		send(t, r.c.Producer(), r.tp, "w", "body-w") // waiting: neither retained nor an event of a finish

		st, err = r.insp.Stats(ctx, r.tp)
		require.NoError(t, err)
		assert.EqualValues(t, 3, st.Retained)
		want := make([]int64, 4)
		for _, id := range []string{"a", "b", "c"} {
			want[slots.IndexString(id, 4)]++
		}
		var events int64
		for i, s := range st.Slots {
			assert.Equal(t, want[i], s.Retained, "slot %d", i)
			events += s.Events
		}
		assert.Equal(t, st.Events, events)
		// Each of the four sends records one event, each cancel one and
		// the ack its completion (the rig's fetch records none).
		assert.EqualValues(t, 7, st.Events)
	})
}
