package pull

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/rmq-go/rmq/consumer"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/forward"
)

// openForwards opens the forwards of one pool and registers each on the
// pool's client, which must not have started (Register after Start is
// refused). A forwarded queue keeps the type it has; a queue never
// published to becomes a FixedTime queue, as a first publish would make
// it. On an error nothing stays open.
func (p *Pool) openForwards(ctx context.Context, specs []forward.Spec, log *slog.Logger, redact func(string) string) error {
	for _, spec := range specs {
		t, err := p.PublishTopic(ctx, spec.Ns, spec.Queue, 0)
		if err != nil {
			_ = p.closeForwards(ctx)
			return fmt.Errorf("forward %s: %w", spec.Name(), err)
		}
		f, err := forward.OpenForward(ctx, spec, log.With("pool", p.Name), redact)
		if err != nil {
			_ = p.closeForwards(ctx)
			return err
		}
		f.Topic = t
		p.Forwards = append(p.Forwards, f)
		if err := p.Client.Register(t, f, consumer.WithConcurrency(forward.Concurrency)); err != nil {
			_ = p.closeForwards(ctx)
			return fmt.Errorf("forward %s: %w", spec.Name(), err)
		}
	}
	return nil
}

// closeForwards closes every forward of the pool, after its client.
func (p *Pool) closeForwards(ctx context.Context) error {
	var errs []error
	for _, f := range p.Forwards {
		errs = append(errs, f.Close(ctx))
	}
	p.Forwards = nil
	return errors.Join(errs...)
}

// ForwardOf returns the forward of queue q of namespace ns, or nil.
func (p *Pool) ForwardOf(ns, q string) *forward.Forward {
	for _, f := range p.Forwards {
		if f.Spec.Ns == ns && f.Spec.Queue == q {
			return f
		}
	}
	return nil
}
