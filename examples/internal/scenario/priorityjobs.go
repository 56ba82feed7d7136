package scenario

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// job is one background job of the story.
type job struct {
	name     string
	priority int64 // at least topic.MinPriority (17)
}

// errGatewayTimeout is how the flaky job fails on its first attempt.
var errGatewayTimeout = errors.New("payment gateway timeout")

// PriorityJobs shows Priority messages: jobs are queued with priorities and
// one worker (concurrency 1) handles them highest first. One job fails on
// its first attempt; its retry ranks below every fresh job (RMQ semantics:
// a retried priority message is scored by its remaining retries, which are
// all below the smallest allowed priority), so it runs last.
func PriorityJobs(ctx context.Context, env Env) (err error) {
	fmt.Fprintln(env.Out, "== Priority jobs (Priority): one worker handles queued jobs highest priority first; a failed job retries after the fresh ones")
	jobs := topic.MustNew("jobs", topic.Priority, 4)
	c, err := newClient(env)
	if err != nil {
		return err
	}
	defer closeClient(c, &err)

	queued := []job{
		{"rebuild-search-index", 20},
		{"send-password-reset-email", 100},
		{"generate-monthly-invoices", 50},
		{"charge-card-order-1002", 90}, // fails once
		{"resize-avatar-images", 30},
		{"send-newsletter", 17},
		{"refund-order-0999", 80},
	}
	const flaky = "charge-card-order-1002"
	want := []string{
		"send-password-reset-email#1", "charge-card-order-1002#1", "refund-order-0999#1",
		"generate-monthly-invoices#1", "resize-avatar-images#1", "rebuild-search-index#1",
		"send-newsletter#1", "charge-card-order-1002#2",
	}

	clk := newClock(env.Out)
	var mu sync.Mutex
	var handled []string
	err = c.Register(jobs, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		mu.Lock()
		n := len(handled) + 1 // one worker: handlers never overlap
		mu.Unlock()
		defer func() {
			mu.Lock()
			handled = append(handled, fmt.Sprintf("%s#%d", m.ID, m.Attempt))
			mu.Unlock()
		}()
		time.Sleep(50 * time.Millisecond) // the work
		retry := ""
		if m.Attempt > 1 {
			retry = fmt.Sprintf(", retry after %q", m.LastError)
		}
		if m.ID == flaky && m.Attempt == 1 {
			clk.say("#%d priority %3d  %-26s attempt %d FAILED (%v) → rolled back, will retry", n, m.Priority, m.ID, m.Attempt, errGatewayTimeout)
			return errGatewayTimeout // rollback: attempt+1, back to the queue below every fresh job
		}
		clk.say("#%d priority %3d  %-26s attempt %d done%s", n, m.Priority, m.ID, m.Attempt, retry)
		return nil
	}), consumer.WithConcurrency(1)) // one worker: jobs run one after another
	if err != nil {
		return err
	}

	// Queue everything before the worker starts, so the whole backlog is
	// there to be ordered.
	p := c.Producer()
	for _, j := range queued {
		if _, err := p.SendPriority(ctx, jobs, []byte(j.name), j.priority, producer.WithKey(j.name)); err != nil {
			return err
		}
		clk.say("queued %-26s priority %3d", j.name, j.priority)
	}
	clk.say("starting one worker")
	if err := c.Start(ctx); err != nil {
		return err
	}
	if err := waitFor(ctx, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) >= len(want)
	}); err != nil {
		return fmt.Errorf("waiting for the jobs: %w", err)
	}

	mu.Lock()
	defer mu.Unlock()
	fmt.Fprintf(env.Out, "  result: %d jobs handled in priority order; the failed job ran again last (attempt 2)\n", len(queued))
	if got := strings.Join(handled, " "); got != strings.Join(want, " ") {
		return fmt.Errorf("handled in order %s, want %s", got, strings.Join(want, " "))
	}
	return nil
}
