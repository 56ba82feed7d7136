package rmq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rmq-go/rmq/internal/engine"
	"github.com/rmq-go/rmq/internal/lifecycle"
	"github.com/rmq-go/rmq/topic"
)

// isClosed reports whether Close began: a waiting Pull then returns
// ErrClosed (Close wakes it) rather than fetching on closed engines.
func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.phase == lifecycle.Closed
}

// pullEntry returns the started entry of t, making and starting its engine
// on first use, held for the caller until it calls letGo. Concurrent first
// Pulls of a topic share one start.
func (c *Client) pullEntry(ctx context.Context, t topic.Topic) (*pullEntry, error) {
	if t.IsZero() {
		return nil, fmt.Errorf("%w: zero Topic", topic.ErrInvalidName)
	}
	for {
		c.mu.Lock()
		switch c.phase {
		case lifecycle.Closed:
			c.mu.Unlock()
			return nil, ErrClosed
		case lifecycle.Started:
		default:
			c.mu.Unlock()
			return nil, ErrNotStarted
		}
		e, ok := c.pulls.byTopic[t.Name()]
		if !ok {
			e = &pullEntry{topic: t, ready: make(chan struct{})}
			if c.pulls.byTopic == nil {
				c.pulls.byTopic = map[string]*pullEntry{}
			}
			c.pulls.byTopic[t.Name()] = e
			c.pulls.starting.Add(1)
			e.users++
			c.mu.Unlock()
			c.startPuller(ctx, e)
			if e.err != nil {
				return nil, e.err
			}
			return e, nil
		}
		if e.topic.Definition() != t.Definition() {
			c.mu.Unlock()
			return nil, fmt.Errorf("%w: %s is %s, given as %s", topic.ErrConflict, t.Name(), e.topic.Definition(), t.Definition())
		}
		e.users++
		c.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			c.letGo([]*pullEntry{e}, time.Time{})
			return nil, ctx.Err()
		}
		if e.err == nil {
			return e, nil
		}
		c.letGo([]*pullEntry{e}, time.Time{})
		// Its start failed (maybe only its caller's ctx ended): try again,
		// this caller starting it.
	}
}

// startPuller makes and starts e's engine outside the client's mu, then
// stores it, or, if Close began meanwhile, closes it again.
func (c *Client) startPuller(ctx context.Context, e *pullEntry) {
	defer c.pulls.starting.Done()
	defer close(e.ready)
	p, err := c.newPuller(ctx, e)
	c.mu.Lock()
	if err == nil && c.phase == lifecycle.Closed {
		err = ErrClosed
	}
	if err != nil {
		delete(c.pulls.byTopic, e.topic.Name())
		e.err = err
	} else {
		e.p = p
	}
	c.mu.Unlock()
	if p != nil && err != nil {
		// Started after Close collected the engines: nobody else closes it.
		_ = p.Close(context.WithoutCancel(ctx))
	}
}

func (c *Client) newPuller(ctx context.Context, e *pullEntry) (*engine.Engine, error) {
	t := e.topic
	settings, err := engine.TopicSettings(c.cfg.pullOptions)
	if err != nil {
		return nil, err
	}
	p, err := c.hub.New(engine.Params{Topic: t, Settings: settings, Pull: true, OnWake: e.Wake})
	if err != nil {
		return nil, err
	}
	c.obs.Consumes(t)
	if err := p.Start(ctx); err != nil {
		return nil, wrapOp(err, "start pulling "+t.Name())
	}
	return p, nil
}

// clientErr reports an engine's lifecycle errors as the client's.
func clientErr(err error) error {
	switch {
	case errors.Is(err, engine.ErrClosed):
		return ErrClosed
	case errors.Is(err, engine.ErrNotStarted):
		return ErrNotStarted
	}
	return err
}
