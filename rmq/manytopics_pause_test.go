package rmq_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// A paused topic does not stop the others on the same client: while three
// of twelve topics (one of each type) are paused, the other nine deliver
// everything sent to them, twice over, and the paused ones deliver nothing;
// after Resume the paused ones deliver what waited, exactly once.
func TestManyTopicsPauseOneKeepsOthers(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		c := e.client()
		ins := c.Inspector()
		types := []topic.Type{topic.FixedTime, topic.Priority, topic.RangeMerge}
		const topics, perRound = 12, 4
		tps := make([]topic.Topic, topics)
		recs := make([]*recorder, topics)
		for i := range tps {
			tps[i] = mustTopic(t, fmt.Sprintf("pause%02d", i), types[i%3], []int{1, 4, 16}[i%3])
			recs[i] = newRecorder(nil)
			require.NoError(t, c.Register(tps[i], recs[i], consumer.WithConcurrency(2)))
		}
		e.start(c)
		paused := map[int]bool{0: true, 4: true, 8: true} // FixedTime, Priority, RangeMerge
		for i := range paused {
			require.NoError(t, ins.Pause(ctx, tps[i]))
		}
		for i, tp := range tps {
			st, err := ins.Stats(ctx, tp)
			require.NoError(t, err)
			assert.Equal(t, paused[i], st.Paused, tp.Name())
		}

		send := func(i, round int) []string {
			var ids []string
			for j := range perRound {
				id := fmt.Sprintf("%s-r%d-%d", tps[i].Name(), round, j)
				ids = append(ids, id)
				var err error
				switch tps[i].Type() {
				case topic.FixedTime:
					_, err = c.Producer().SendFixedTime(ctx, tps[i], []byte(id), time.Now(), producer.WithKey(id))
				case topic.Priority:
					_, err = c.Producer().SendPriority(ctx, tps[i], []byte(id), topic.MinPriority+int64(j), producer.WithKey(id))
				case topic.RangeMerge:
					_, err = c.Producer().SendRangeMerge(ctx, tps[i], []byte(id), 0, producer.WithKey(id))
				}
				require.NoError(t, err)
			}
			return ids
		}
		expectIDs := func(i int, want []string) {
			t.Helper()
			var got []string
			for _, d := range recs[i].nextN(t, len(want), waitLong) {
				got = append(got, d.ID)
			}
			assert.ElementsMatch(t, want, got, tps[i].Name())
		}

		waiting := map[int][]string{}
		for round := range 2 {
			sent := map[int][]string{}
			for i := range tps {
				sent[i] = send(i, round)
				if paused[i] {
					waiting[i] = append(waiting[i], sent[i]...)
				}
			}
			for i := range tps {
				if !paused[i] {
					expectIDs(i, sent[i])
				}
			}
		}
		quiet(700 * time.Millisecond) // the paused topics get the time to deliver what they must not
		for i := range paused {
			recs[i].nothingYet(t)
			assert.Equal(t, counts{Store: 2 * perRound, Msg: 2 * perRound}, e.counts(tps[i]), "%s waits while paused", tps[i].Name())
		}

		for i := range paused {
			require.NoError(t, ins.Resume(ctx, tps[i]))
		}
		for i := range paused {
			expectIDs(i, waiting[i])
		}
		for i, tp := range tps {
			recs[i].drained(t, e, tp, counts{})
		}
	})
}
