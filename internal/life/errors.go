package life

import "errors"

// The errors of a message's end, which package rmq exports under the
// same names (rmq.ErrCancelled, rmq.ErrDead): the engine, which may not
// import rmq, makes the cancelled cause.
var (
	// ErrCancelled: the message was cancelled (rmq.Inspector.Cancel). It
	// is the cause of a cancelled handler's context and Wait's error.
	ErrCancelled = errors.New("rmq: message cancelled")
	// ErrDead: the message went to the dead queue (Wait's error).
	ErrDead = errors.New("rmq: message dead")
)
