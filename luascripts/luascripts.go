// Package luascripts holds every Lua script of RMQ, one .lua file each, and
// the envelope format those scripts store. Scripts are the only code that
// writes more than one key; each touches the keys of one topic slot, all
// named through KEYS and sharing one hash tag.
package luascripts

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed *.lua
var files embed.FS

// Script names, also the file names without ".lua".
const (
	NameFetch    = "fetch"
	NameAck      = "ack"
	NameRollback = "rollback"
	NameSweep    = "sweep"
	NameExtend   = "extend"
	NameRemove   = "remove"
)

var (
	SendBatch = load("sendbatch")
	Fetch     = load(NameFetch)
	Ack       = load(NameAck)
	Rollback  = load(NameRollback)
	Sweep     = load(NameSweep)
	Extend    = load(NameExtend)
	Remove    = load(NameRemove)
	// Requeue and DeleteDead serve rmq.Inspector: dead messages back to
	// store as fresh ones, and dead messages deleted with their bodies.
	Requeue    = load("requeue")
	DeleteDead = load("deletedead")
)

// registry lists every script by name, for Load and for tests that read
// their sources.
var registry = map[string]*redis.Script{}

var lib = mustRead("lib")

func mustRead(name string) string {
	b, err := files.ReadFile(name + ".lua")
	if err != nil {
		panic(err)
	}
	return string(b)
}

// load builds a script as lib.lua followed by the script's own file (whose
// header names its KEYS and ARGV); lib only adds functions.
func load(name string) *redis.Script {
	s := redis.NewScript(lib + "\n" + mustRead(name))
	registry[name] = s
	return s
}

// FileSource returns the text of one .lua file as written, without lib.
func FileSource(name string) (string, error) {
	b, err := files.ReadFile(name + ".lua")
	return string(b), err
}

// Names lists the registered scripts.
func Names() []string {
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Load loads every script into Redis (on every master of a cluster), so
// that pipelined EVALSHA calls, which do not fall back to EVAL, find them.
func Load(ctx context.Context, rdb redis.UniversalClient) error {
	loadOn := func(ctx context.Context, c redis.Cmdable) error {
		for name, s := range registry {
			if err := s.Load(ctx, c).Err(); err != nil {
				return fmt.Errorf("rmq: load script %s: %w", name, err)
			}
		}
		return nil
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return loadOn(ctx, c)
		})
	}
	return loadOn(ctx, rdb)
}

// IsNoScript reports whether err is Redis's NOSCRIPT reply.
func IsNoScript(err error) bool {
	var re redis.Error
	return err != nil && errors.As(err, &re) && strings.HasPrefix(re.Error(), "NOSCRIPT")
}
