package scenario

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// PayWindow is how long an order may stay unpaid before it is cancelled.
const PayWindow = 2 * time.Second

type orderStatus int

const (
	awaitingPayment orderStatus = iota
	paid
	cancelled
)

// shop is the order database of the story: in memory, guarded by a mutex.
// The timeout handler and the payment path both go through it, so whichever
// comes second sees what the first did.
type shop struct {
	mu     sync.Mutex
	orders map[string]orderStatus
}

// cancelIfUnpaid is what the timeout handler does: cancel an order that is
// still awaiting payment. It reports the status the order had.
func (s *shop) cancelIfUnpaid(id string) orderStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.orders[id]
	if st == awaitingPayment {
		s.orders[id] = cancelled
	}
	return st
}

// pay marks an order paid unless it was cancelled already.
func (s *shop) pay(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.orders[id] != awaitingPayment {
		return false
	}
	s.orders[id] = paid
	return true
}

// OrderTimeout shows FixedTime messages: every new order schedules a
// timeout message due PayWindow after its creation; paying removes that
// message (Producer().Remove), and a timeout that fires cancels the order.
//
// Timeline: orders 1001..1004 are created 0.3 s apart; 1001 and 1003 are
// paid in time; 1002 and 1004 are cancelled by their timeouts; a late
// payment for 1002 is refused.
func OrderTimeout(ctx context.Context, env Env) (err error) {
	fmt.Fprintf(env.Out, "== Order timeout (FixedTime): an order unpaid %v after creation is cancelled\n", PayWindow)
	orders := topic.MustNew("order-timeouts", topic.FixedTime, 8)
	c, err := newClient(env)
	if err != nil {
		return err
	}
	defer closeClient(c, &err)

	clk := newClock(env.Out)
	db := &shop{orders: map[string]orderStatus{}}
	var mu sync.Mutex
	var cancelledIDs, firedForPaid []string
	err = c.Register(orders, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		late := time.Since(m.DueAt)
		switch db.cancelIfUnpaid(m.ID) {
		case awaitingPayment:
			clk.say("%s still unpaid at its timeout → CANCELLED (timeout fired %s after its due time %s)",
				m.ID, ms(late), clk.since(m.DueAt))
			mu.Lock()
			cancelledIDs = append(cancelledIDs, m.ID)
			mu.Unlock()
		default:
			// Only possible when the payment raced with a delivery already
			// under way; the handler must not cancel a paid order.
			clk.say("%s timeout fired but the order is no longer awaiting payment → nothing to do", m.ID)
			mu.Lock()
			firedForPaid = append(firedForPaid, m.ID)
			mu.Unlock()
		}
		return nil // ack: the timeout is handled
	}))
	if err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	p := c.Producer()

	create := func(id string) error {
		db.mu.Lock()
		db.orders[id] = awaitingPayment
		db.mu.Unlock()
		due := time.Now().Add(PayWindow)
		// The order id is the message key: Remove finds the message by it,
		// and a re-send for the same order would move its timeout.
		if _, err := p.SendFixedTime(ctx, orders, []byte(id), due, producer.WithKey(id)); err != nil {
			return err
		}
		clk.say("%s created, awaiting payment; timeout scheduled for %s", id, clk.since(due))
		return nil
	}
	payment := func(id string) error {
		if !db.pay(id) {
			removed, err := p.Remove(ctx, orders, id)
			if err != nil {
				return err
			}
			clk.say("%s payment REFUSED: the order was already cancelled (Remove → %v: no timeout waiting)", id, removed)
			return nil
		}
		removed, err := p.Remove(ctx, orders, id)
		if err != nil {
			return err
		}
		clk.say("%s PAID → its timeout message is removed (Remove → %v)", id, removed)
		if removed != producer.RemovedWaiting {
			return fmt.Errorf("%s: Remove found no waiting timeout message for an order paid in time", id)
		}
		return nil
	}

	steps := []struct {
		at time.Duration
		do func() error
	}{
		{0, func() error { return create("order-1001") }},
		{300 * time.Millisecond, func() error { return create("order-1002") }},
		{600 * time.Millisecond, func() error { return create("order-1003") }},
		{900 * time.Millisecond, func() error { return create("order-1004") }},
		{1200 * time.Millisecond, func() error { return payment("order-1001") }},
		{2000 * time.Millisecond, func() error { return payment("order-1003") }},
		// 1002 came due at 2.3 s.
		{2600 * time.Millisecond, func() error { return payment("order-1002") }},
	}
	for _, s := range steps {
		if err := clk.sleepUntil(ctx, s.at); err != nil {
			return err
		}
		if err := s.do(); err != nil {
			return err
		}
	}
	// 1004 comes due at 2.9 s; give the paid orders' former due times a
	// margin to prove that nothing fires for them.
	want := []string{"order-1002", "order-1004"}
	if err := waitFor(ctx, 5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(cancelledIDs) >= len(want)
	}); err != nil {
		return fmt.Errorf("waiting for the timeouts: %w", err)
	}
	if err := clk.sleepUntil(ctx, 3200*time.Millisecond); err != nil {
		return err
	}

	mu.Lock()
	defer mu.Unlock()
	sort.Strings(cancelledIDs)
	fmt.Fprintf(env.Out, "  result: 4 orders, 2 paid in time (their timeouts removed, never fired), %d cancelled by timeout: %s\n",
		len(cancelledIDs), strings.Join(cancelledIDs, ", "))
	if strings.Join(cancelledIDs, ",") != strings.Join(want, ",") || len(firedForPaid) > 0 {
		return fmt.Errorf("cancelled %v (want %v), timeouts fired for paid orders: %v", cancelledIDs, want, firedForPaid)
	}
	return nil
}
