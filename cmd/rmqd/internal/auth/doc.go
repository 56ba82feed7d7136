// Package auth holds what rmqd's access control keeps in Redis and in
// memory: the token store and its watch of deleted tokens, the per-token
// rate limits and their throttle (refund.lua), the guard against guessing
// tokens and passwords, and the long-poll caps per token.
package auth
