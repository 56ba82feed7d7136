package options

import "context"

// ProgressFunc stores the latest progress of a delivery (slot, id, token)
// of the engine whose handler context carries it; it returns an error
// wrapping consumer.ErrNotCurrent when the delivery is no longer current.
type ProgressFunc func(ctx context.Context, slot int, id string, token int64, p []byte) error

type progressKey struct{}

// WithProgress returns ctx carrying f: the engine puts its progress writer
// into the base of its handlers' contexts once, so no delivery pays for it.
func WithProgress(ctx context.Context, f ProgressFunc) context.Context {
	return context.WithValue(ctx, progressKey{}, f)
}

// ProgressFrom returns the progress writer ctx carries, nil when none
// (not a handler's context).
func ProgressFrom(ctx context.Context) ProgressFunc {
	f, _ := ctx.Value(progressKey{}).(ProgressFunc)
	return f
}
