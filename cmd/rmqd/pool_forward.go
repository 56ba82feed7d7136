package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/rmq-go/rmq/consumer"
)

// openForwards opens the forwards of one pool and registers each on the
// pool's client, which must not have started (Register after Start is
// refused). A forwarded queue keeps the type it has; a queue never
// published to becomes a FixedTime queue, as a first publish would make
// it. On an error nothing stays open.
func (p *pool) openForwards(ctx context.Context, specs []forwardSpec, log *slog.Logger, redact func(string) string) error {
	for _, spec := range specs {
		t, err := p.publishTopic(ctx, spec.ns, spec.queue, 0)
		if err != nil {
			_ = p.closeForwards(ctx)
			return fmt.Errorf("forward %s: %w", spec.name(), err)
		}
		f, err := openForward(ctx, spec, log.With("pool", p.name), redact)
		if err != nil {
			_ = p.closeForwards(ctx)
			return err
		}
		f.topic = t
		p.forwards = append(p.forwards, f)
		if err := p.client.Register(t, f, consumer.WithConcurrency(forwardConcurrency)); err != nil {
			_ = p.closeForwards(ctx)
			return fmt.Errorf("forward %s: %w", spec.name(), err)
		}
	}
	return nil
}

// closeForwards closes every forward of the pool, after its client.
func (p *pool) closeForwards(ctx context.Context) error {
	var errs []error
	for _, f := range p.forwards {
		errs = append(errs, f.close(ctx))
	}
	p.forwards = nil
	return errors.Join(errs...)
}

// forwardOf returns the forward of queue q of namespace ns, or nil.
func (p *pool) forwardOf(ns, q string) *forward {
	for _, f := range p.forwards {
		if f.spec.ns == ns && f.spec.queue == q {
			return f
		}
	}
	return nil
}
