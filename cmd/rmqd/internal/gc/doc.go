// Package gc sets the garbage collector target rmqd runs with.
package gc
