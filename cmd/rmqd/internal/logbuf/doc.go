// Package logbuf gathers log lines and writes them out together.
package logbuf
