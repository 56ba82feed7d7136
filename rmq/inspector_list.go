package rmq

import (
	"github.com/rmq-go/rmq/internal/inspect"
)

// Page sizes of Inspector listings.
const (
	DefaultListLimit = inspect.DefaultListLimit
	MaxListLimit     = inspect.MaxListLimit
)

// ListOption configures one listing (Inspector.Dead).
type ListOption func(*listConfig)

type listConfig struct {
	limit  int
	cursor string
}

// WithLimit sets the page size: at most n messages (default 100, at most
// 10,000).
func WithLimit(n int) ListOption { return func(c *listConfig) { c.limit = n } }

// WithCursor continues a listing after the message the cursor was taken
// from (DeadMessage.Cursor of a page's last message). An empty cursor starts
// at the beginning.
func WithCursor(cursor string) ListOption { return func(c *listConfig) { c.cursor = cursor } }

// listOptions applies opts to the default page; the listing checks the
// limit before anything else.
func listOptions(opts []ListOption) inspect.ListConfig {
	c := listConfig{limit: DefaultListLimit}
	for _, o := range opts {
		o(&c)
	}
	return inspect.ListConfig{Limit: c.limit, Cursor: c.cursor}
}

// convertAll converts a listing of internal/inspect's (or
// internal/schedule's) with f, passing its error on.
func convertAll[A, B any](in []A, err error, f func(A) B) ([]B, error) {
	if err != nil {
		return nil, err
	}
	out := make([]B, len(in))
	for j, x := range in {
		out[j] = f(x)
	}
	return out, nil
}
