// Package ids makes rmqd's identifiers: request ids, tokens and the
// fingerprints that stand for tokens in logs.
package ids
