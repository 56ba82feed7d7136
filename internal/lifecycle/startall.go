package lifecycle

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// Owner is what StartAll starts and CloseAll closes: an owner of actors
// (the consumer engines of a client).
type Owner interface {
	Start(ctx context.Context) error
	Close(ctx context.Context) error
}

// errNotStarted marks the owners StartAll did not start after a failure.
var errNotStarted = errors.New("rmq: not started")

// StartAll starts owners, up to parallel at once: a start is a few round
// trips, mostly waiting, so many start side by side rather than one after
// another. On the first failure no more start, and every one that started
// is closed again; it returns the index of a failed owner and its error
// (-1 and nil when all started).
func StartAll[T Owner](ctx context.Context, owners []T, parallel int) (int, error) {
	errs := make([]error, len(owners))
	sem := make(chan struct{}, parallel)
	var failed atomic.Bool
	var wg sync.WaitGroup
	for i, o := range owners {
		sem <- struct{}{}
		if failed.Load() {
			<-sem
			errs[i] = errNotStarted
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if errs[i] = o.Start(ctx); errs[i] != nil {
				failed.Store(true)
			}
		}()
	}
	wg.Wait()
	if !failed.Load() {
		return -1, nil
	}
	first := -1
	for i, o := range owners {
		switch {
		case errs[i] == nil:
			_ = o.Close(ctx)
		case first < 0 && !errors.Is(errs[i], errNotStarted):
			first = i
		}
	}
	return first, errs[first]
}

// CloseAll closes owners in parallel and returns their errors, by index.
func CloseAll[T Owner](ctx context.Context, owners []T) []error {
	errs := make([]error, len(owners))
	var wg sync.WaitGroup
	for i, o := range owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = o.Close(ctx)
		}()
	}
	wg.Wait()
	return errs
}
