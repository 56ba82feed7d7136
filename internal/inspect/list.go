package inspect

import (
	"fmt"
)

// Page sizes of listings (rmq.DefaultListLimit, rmq.MaxListLimit).
const (
	DefaultListLimit = 100
	MaxListLimit     = 10_000
)

// ListConfig is what a listing's options (rmq.ListOption) set.
type ListConfig struct {
	Limit  int    // page size, 1..MaxListLimit
	Cursor string // "": from the start
}

func checkLimit(n int) error {
	if n < 1 || n > MaxListLimit {
		return fmt.Errorf("%w: %d (want 1..%d)", ErrInvalidPageSize, n, MaxListLimit)
	}
	return nil
}
