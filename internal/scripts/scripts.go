package scripts

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/luascripts"
)

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
	// Send1 sends one message without options (the producer's single
	// sends); SendBatch any number, with options.
	Send1     = load("send1")
	SendBatch = load("sendbatch")
	Fetch     = load(NameFetch)
	Ack       = load(NameAck)
	Rollback  = load(NameRollback)
	Sweep     = load(NameSweep)
	Extend    = load(NameExtend)
	Remove    = load(NameRemove)
	// Requeue and DeleteDead serve rmq.Inspector: dead messages back to
	// store as fresh ones, and dead messages deleted with their bodies.
	// Confirm and Release end the holding of deliveries a lookahead
	// fetch (FetchCall.Lookahead) took before their instant.
	Confirm    = load("confirm")
	Release    = load("release")
	Requeue    = load("requeue")
	DeleteDead = load("deletedead")
	// Schedule and ScheduleReg serve rmq's schedules (internal/schedule).
	Schedule    = load("schedule")
	ScheduleReg = load("schedreg")
	// GSend stores messages that carry a group, GRemove removes one that
	// waits in its group, and Permit hands out a topic's rate and
	// concurrency on a cluster (flow control, docs/flow-control.md).
	GSend   = load("gsend")
	GRemove = load("gremove")
	Permit  = load("permit")
	// Progress stores an in-flight delivery's progress, and Cancel
	// cancels a message wherever it is (a message's life after hand-off,
	// lifelib.lua).
	Progress = load("progress")
	Cancel   = load("cancel")
	// FlowStage, FlowAct, FlowRec, FlowCheck and FlowEnd serve flows (parents that
	// run after their children, producer.SendFlow): stage a flow's nodes
	// of a slot, make them live (or discard them), record a child's
	// outcome in its parent's record, and find the outcomes nobody
	// reported; FlowEnd cancels or removes a parent that waits for its
	// children.
	FlowStage = load("flowstage")
	FlowAct   = load("flowact")
	FlowRec   = load("flowrec")
	FlowCheck = load("flowcheck")
	FlowEnd   = load("flowend")
)

// registry lists every script by name, for Load and for tests that read
// their sources.
var registry = map[string]*redis.Script{}

// lib is lib.lua's definitions followed by flowlib.lua's, grouplib.lua's
// and lifelib.lua's
// (each may call the ones before it, never the other way round).
var lib = parseLib(mustRead("lib") + "\n" + mustRead("flowlib") + "\n" + mustRead("grouplib") + "\n" + mustRead("lifelib"))

func mustRead(name string) string {
	src, err := luascripts.Source(name)
	if err != nil {
		panic(err)
	}
	return src
}

// load builds a script as the lib.lua definitions it uses followed by its
// own file (whose header names its KEYS and ARGV). Redis defines every
// prepended function on every call, so unused ones are left out; a script
// whose common path needs none of them marks the line after which they go
// (libHere): the path before it returns without defining them.
func load(name string) *redis.Script {
	s := redis.NewScript(fullSource(name))
	registry[name] = s
	return s
}

// fullSource is the text of script name as Redis runs it.
func fullSource(name string) string {
	body := mustRead(name)
	if head, tail, ok := strings.Cut(body, libHere); ok {
		return head + libHere + lib.prelude(tail) + "\n" + tail
	}
	return lib.prelude(body) + "\n" + body
}

// libHere marks where a script takes lib.lua's definitions (load).
const libHere = "-- lib.lua's definitions go here\n"

// libDef is one top-level definition of lib.lua ("local function f" or
// "local NAME ="), with the comment lines above it.
type libDef struct {
	name  string
	text  string
	words map[string]bool // the word runs of text (wordsOf)
}

type libFile []libDef

var libDefStart = regexp.MustCompile(`^local (?:function )?([A-Za-z_][A-Za-z0-9_]*)`)

func parseLib(src string) libFile {
	var defs libFile
	var pending []string // comments and blank lines before the next definition
	for _, line := range strings.Split(src, "\n") {
		if m := libDefStart.FindStringSubmatch(line); m != nil {
			defs = append(defs, libDef{name: m[1], text: strings.Join(append(pending, line), "\n")})
			pending = nil
			continue
		}
		if len(defs) > 0 && (strings.HasPrefix(line, " ") || line == "end") {
			defs[len(defs)-1].text += "\n" + line
			continue
		}
		pending = append(pending, line)
	}
	for i := range defs {
		defs[i].words = wordsOf(defs[i].text)
	}
	return defs
}

// wordRun is a run of word characters: a name appears in a text, as
// `\bname\b` would find it, when it is one of the text's word runs.
var wordRun = regexp.MustCompile(`[A-Za-z0-9_]+`)

// wordsOf returns the word runs of text. Each definition's are found once:
// matching a regexp per name and definition pair made every process that
// imports the package spend seconds in its init under the race detector.
func wordsOf(text string) map[string]bool {
	m := map[string]bool{}
	for _, w := range wordRun.FindAllString(text, -1) {
		m[w] = true
	}
	return m
}

// prelude returns, in lib.lua's order, the definitions body uses, directly
// or through other definitions.
func (l libFile) prelude(body string) string {
	bodyWords := wordsOf(body)
	need := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for _, d := range l {
			if need[d.name] {
				continue
			}
			if bodyWords[d.name] {
				need[d.name], changed = true, true
				continue
			}
			for _, o := range l {
				if need[o.name] && o.name != d.name && o.words[d.name] {
					need[d.name], changed = true, true
					break
				}
			}
		}
	}
	var out []string
	for _, d := range l {
		if need[d.name] {
			out = append(out, d.text)
		}
	}
	return strings.Join(out, "\n")
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
	return redis.HasErrorPrefix(err, "NOSCRIPT")
}
