package engine

import (
	"errors"

	"github.com/rmq-go/rmq/internal/engine/wake"
)

var (
	// ErrNotStarted is returned by Pull before Start; rmq.Client reports
	// its own ErrNotStarted.
	ErrNotStarted = errors.New("rmq: consumer not started")
	// ErrClosed is returned by Pull once Close began, and by Start after
	// Close; rmq.Client reports its own ErrClosed.
	ErrClosed = errors.New("rmq: consumer closed")
	// errStarted: a second Start.
	errStarted = errors.New("rmq: consumer already started")
	// errHubClosed: an engine started after its client's hub was closed.
	errHubClosed = wake.ErrHubClosed
)
