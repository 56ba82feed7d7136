// Package redact keeps the credentials rmqd is given out of what it
// shows: URLs, log lines, flags and its command line.
package redact
