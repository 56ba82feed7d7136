package rmq

import (
	"fmt"
)

// Page sizes of Inspector listings.
const (
	DefaultListLimit = 100
	MaxListLimit     = 10_000
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

func listOptions(opts []ListOption) (listConfig, error) {
	c := listConfig{limit: DefaultListLimit}
	for _, o := range opts {
		o(&c)
	}
	if err := checkLimit(c.limit); err != nil {
		return c, err
	}
	return c, nil
}

func checkLimit(n int) error {
	if n < 1 || n > MaxListLimit {
		return fmt.Errorf("%w: %d (want 1..%d)", ErrInvalidLimit, n, MaxListLimit)
	}
	return nil
}
