// Package respond writes rmqd's answers: JSON bodies and errors, the
// recorder every request is answered through, and what the access log
// shows of a request.
package respond
