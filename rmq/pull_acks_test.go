package rmq_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// Pulled acks and acks by id of many topics, all at once from many
// goroutines, share the client's ack rounds: each answers as it would
// alone (an Ack twice of one delivery: both nil, one Finished; an ack by
// id: true, of an unknown id: false), and nothing is left in flight.
func TestPullAckAndAckByIDConcurrentAcrossTopics(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		obs := newPullObserver()
		c := e.client(rmq.WithObserver(obs))
		e.start(c)
		p := c.Producer()
		var topics []topic.Topic
		for i := range 8 {
			typ, slots := topic.FixedTime, 4
			switch i % 4 {
			case 1:
				typ, slots = topic.Priority, 2
			case 3:
				typ, slots = topic.RangeMerge, 1
			}
			tp := mustTopic(t, fmt.Sprintf("pullacks%d", i), typ, slots)
			topics = append(topics, tp)
			for j := range 6 {
				id := fmt.Sprintf("m%d-%d", i, j)
				send(t, p, tp, id, id)
			}
		}
		const total = 8 * 6
		var ds []*rmq.Delivery
		for len(ds) < total {
			more, err := c.Pull(ctx, topics, total-len(ds), rmq.WithWait(2*time.Second))
			require.NoError(t, err)
			require.NotEmpty(t, more)
			ds = append(ds, more...)
		}
		topicOf := map[string]topic.Topic{}
		for _, tp := range topics {
			topicOf[tp.Name()] = tp
		}

		var wg sync.WaitGroup
		errs := make([]error, 2*total)
		acked := make([]bool, total)
		unknown := make([]bool, 8)
		for i, d := range ds {
			if i%2 == 0 {
				// Twice, concurrently: one acks, the other finds it gone.
				for k := range 2 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						errs[2*i+k] = d.Ack(ctx)
					}()
				}
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				acked[i], errs[2*i] = c.AckByID(ctx, topicOf[d.Topic], d.ID)
			}()
		}
		for i, tp := range topics {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				unknown[i], err = c.AckByID(ctx, tp, "nobody")
				assert.NoError(t, err)
			}()
		}
		wg.Wait()

		for i, d := range ds {
			assert.NoError(t, errs[2*i], d.ID)
			assert.NoError(t, errs[2*i+1], d.ID)
			if i%2 == 1 {
				assert.True(t, acked[i], "%s acked by id", d.ID)
			}
		}
		assert.Equal(t, make([]bool, 8), unknown, "unknown ids are not acked")
		delivered, outcomes, _ := obs.state()
		assert.Equal(t, total, delivered)
		assert.Len(t, outcomes, total/2, "one Finished per pulled delivery acked (acks by id tell none)")
		for _, o := range outcomes {
			assert.Equal(t, consumer.Acked, o)
		}
		for _, tp := range topics {
			e.eventuallyCounts(tp, counts{})
		}
	})
}
