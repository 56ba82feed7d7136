// Package luascripts holds every Lua script of RMQ, one .lua file each.
// Scripts are the only code that writes more than one key. Every key comes
// through KEYS, and the keys of one topic slot share one hash tag; each file
// starts with a header naming its KEYS, ARGV and reply.
//
// The package exports the sources so that they can be read and audited
// (rmqctl and the tests print them); the library runs them through its
// internal packages. lib.lua holds helpers that are prepended to every
// script that uses them, since Redis scripts cannot call each other;
// flowlib.lua and grouplib.lua hold those of flow control (groups and
// limits), prepended after lib.lua's, and lifelib.lua those of a message's
// life after hand-off (retained records, the event log, waiters).
package luascripts

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:embed *.lua
var files embed.FS

// Source returns the text of one .lua file as written, by name without
// ".lua" ("fetch", "ack", "lib", ...). An unknown name gives an error
// matching fs.ErrNotExist.
func Source(name string) (string, error) {
	b, err := files.ReadFile(name + ".lua")
	if err != nil {
		return "", fmt.Errorf("rmq: no script %q: %w", name, fs.ErrNotExist)
	}
	return string(b), nil
}

// Names lists the scripts, sorted, without the libraries (lib, flowlib,
// grouplib, lifelib: files named *lib.lua), which are not scripts of their own but
// the helpers prepended to the others.
func Names() []string {
	entries, _ := files.ReadDir(".")
	var out []string
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".lua")
		if !strings.HasSuffix(name, "lib") {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
