package consumer

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidOption is returned for an option out of range: by
	// rmq.Client.Register for a consumer option, by rmq.New for a client
	// option, by producer.New for a producer option (rmq.ErrInvalidOption
	// is this same error).
	ErrInvalidOption = errors.New("rmq: invalid option")
	// ErrLeaseLost is the cause of a handler context cancelled because its
	// delivery is no longer the current one (the lease ran out and the
	// message was rolled back, possibly redelivered elsewhere).
	ErrLeaseLost = errors.New("rmq: lease lost")
	// ErrHandlerTimeout is recorded as the last error of a delivery whose
	// handler ran past WithHandlerTimeout.
	ErrHandlerTimeout = errors.New("rmq: handler timeout")
	// ErrShutdown is recorded as the last error of a delivery rolled back
	// because Close's deadline passed before its handler returned.
	ErrShutdown = errors.New("rmq: consumer shut down before the handler finished")
	// ErrFenced is the cause of a handler context cancelled because Redis
	// refused a call of its slot: a newer owner epoch is stored, so another
	// worker owns the slot now (ZooKeeper mode, rmq.WithZooKeeper).
	ErrFenced = errors.New("rmq: slot owned by another worker (owner epoch moved on)")
	// ErrOwnershipLost is the cause of handler contexts cancelled in
	// ZooKeeper mode (rmq.WithZooKeeper) because this worker could no
	// longer prove that its ZooKeeper session, and with it the ownership
	// of its slots, is alive.
	ErrOwnershipLost = errors.New("rmq: slot ownership lost (ZooKeeper session unconfirmed or expired)")
)

// PanicError is the error a delivery is rolled back with when its handler
// panics. The panic does not reach the caller's goroutine.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("rmq: handler panic: %v", e.Value) }

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}
