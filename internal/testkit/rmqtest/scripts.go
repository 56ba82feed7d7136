package rmqtest

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/scripts"
)

// scriptsBySHA names every script of luascripts by its SHA1.
var scriptsBySHA = func() map[string]string {
	m := map[string]string{}
	for name, s := range map[string]*redis.Script{
		"sendbatch":          scripts.SendBatch,
		"send1":              scripts.Send1,
		scripts.NameFetch:    scripts.Fetch,
		scripts.NameAck:      scripts.Ack,
		scripts.NameRollback: scripts.Rollback,
		scripts.NameSweep:    scripts.Sweep,
		scripts.NameExtend:   scripts.Extend,
		scripts.NameRemove:   scripts.Remove,
		"requeue":            scripts.Requeue,
		"deletedead":         scripts.DeleteDead,
		scripts.NameTakeover: scripts.Takeover,
		"confirm":            scripts.Confirm,
		"release":            scripts.Release,
		"schedule":           scripts.Schedule,
		"schedreg":           scripts.ScheduleReg,
		"gsend":              scripts.GSend,
		"gremove":            scripts.GRemove,
		"permit":             scripts.Permit,
		"progress":           scripts.Progress,
		"cancel":             scripts.Cancel,
		"flowstage":          scripts.FlowStage,
		"flowact":            scripts.FlowAct,
		"flowrec":            scripts.FlowRec,
		"flowcheck":          scripts.FlowCheck,
		"flowend":            scripts.FlowEnd,
	} {
		m[s.Hash()] = name
	}
	return m
}()

// ScriptName is the name of the script whose SHA1 is sha ("fetch",
// "sendbatch", ...), or "" for a script not of luascripts.
func ScriptName(sha string) string { return scriptsBySHA[sha] }

// ScriptSHAs lists the SHA1 of every script of luascripts.
func ScriptSHAs() []string {
	out := make([]string, 0, len(scriptsBySHA))
	for sha := range scriptsBySHA {
		out = append(out, sha)
	}
	sort.Strings(out)
	return out
}

// ScriptSHA returns the SHA1 of the script an EVAL or EVALSHA (or their _RO
// forms) runs.
func ScriptSHA(cmd redis.Cmder) (string, bool) {
	args := cmd.Args()
	if len(args) < 2 {
		return "", false
	}
	switch strings.ToLower(fmt.Sprint(args[0])) {
	case "evalsha", "evalsha_ro":
		return fmt.Sprint(args[1]), true
	case "eval", "eval_ro":
		sum := sha1.Sum([]byte(fmt.Sprint(args[1])))
		return hex.EncodeToString(sum[:]), true
	}
	return "", false
}

// ScriptCounter counts the calls of one script, pipelined or not: its
// Observe is a redistest.Observer's Before.
type ScriptCounter struct {
	shas  map[string]bool
	calls atomic.Int64
}

// NewScriptCounter counts the calls of any of scripts.
func NewScriptCounter(scripts ...*redis.Script) *ScriptCounter {
	h := &ScriptCounter{shas: make(map[string]bool, len(scripts))}
	for _, s := range scripts {
		h.shas[s.Hash()] = true
	}
	return h
}

// Observe counts cmd if it runs the script.
func (h *ScriptCounter) Observe(cmd redis.Cmder) {
	if sha, ok := ScriptSHA(cmd); ok && h.shas[sha] {
		h.calls.Add(1)
	}
}

// N is the number of calls so far.
func (h *ScriptCounter) N() int64 { return h.calls.Load() }

// KeySlotCheck is a go-redis hook, on every client an Env makes, that
// checks each script call (EVAL, EVALSHA and their _RO forms, alone or in a
// pipeline) the library or a test sends: all its KEYS must lie in one Redis
// Cluster hash slot, as CLUSTER KEYSLOT computes it. On a cluster Redis
// would refuse the call (CROSSSLOT); on a single node nothing would, so the
// hook is what catches a call site that mixes slots there. On a single
// node the scripts that take several slot groups (groupSize) may do so, and
// then each group must lie in one hash slot. It also counts the calls of
// each script.
type KeySlotCheck struct {
	mu      sync.Mutex
	grouped bool // single node: multi-group calls allowed
	bad     []string
	calls   map[string]int // script name -> calls
}

// groupSize is the number of KEYS per slot group of the scripts that take
// several groups in one call on a single node.
var groupSize = map[string]int{"sendbatch": 5, scripts.NameFetch: 4, scripts.NameAck: 6, "confirm": 1, "release": 4, "gsend": 7}

// NewKeySlotCheck is a check for a single node (grouped) or a cluster.
func NewKeySlotCheck(grouped bool) *KeySlotCheck {
	return &KeySlotCheck{grouped: grouped, calls: map[string]int{}}
}

// Observe checks one command; it is a redistest.Observer's Before.
func (h *KeySlotCheck) Observe(cmd redis.Cmder) {
	args := cmd.Args()
	sha, ok := ScriptSHA(cmd)
	if !ok || len(args) < 3 {
		return
	}
	name, ok := scriptsBySHA[sha]
	if !ok {
		name = "script " + sha[:8]
	}
	n, err := strconv.Atoi(fmt.Sprint(args[2]))
	if err != nil || n < 0 || 3+n > len(args) {
		h.fail(fmt.Sprintf("%s: bad key count in %v", name, args))
		return
	}
	keys := args[3 : 3+n]
	h.mu.Lock()
	h.calls[name]++
	h.mu.Unlock()
	if h.grouped {
		// Flow control's layouts (fetch, ack, rollback, sweep): slot groups
		// of several sizes, and on a single node the topic's own keys
		// besides them (flowGroups).
		if groups, ok := flowGroups(name, keys, args[3+n:]); ok {
			for _, g := range groups {
				h.oneSlot(name, g)
			}
			return
		}
	}
	size := groupSize[name]
	if !h.grouped || size == 0 || (size > 1 && n <= size+1) {
		// One group (a fenced call adds its epoch key to one group; a
		// script of one key per group is never fenced).
		size = n
	}
	if n%size != 0 {
		h.fail(fmt.Sprintf("%s: %d KEYS are not groups of %d", name, n, size))
		return
	}
	for g := 0; g < n; g += size {
		hashSlots := map[int][]string{}
		for _, k := range keys[g : g+size] {
			key := fmt.Sprint(k)
			hs := keyspace.HashSlot(key)
			hashSlots[hs] = append(hashSlots[hs], key)
		}
		if len(hashSlots) > 1 {
			h.fail(fmt.Sprintf("%s: KEYS span %d hash slots: %v", name, len(hashSlots), hashSlots))
		}
	}
}

// oneSlot fails unless keys lie in one hash slot.
func (h *KeySlotCheck) oneSlot(name string, keys []any) {
	hashSlots := map[int][]string{}
	for _, k := range keys {
		key := fmt.Sprint(k)
		hs := keyspace.HashSlot(key)
		hashSlots[hs] = append(hashSlots[hs], key)
	}
	if len(hashSlots) > 1 {
		h.fail(fmt.Sprintf("%s: KEYS span %d hash slots: %v", name, len(hashSlots), hashSlots))
	}
}

// flowGroups splits the KEYS of a single node's call under flow control
// into the groups that must each lie in one hash slot, leaving out the
// topic's own keys (tflow, every slot's prepare set), which a single
// node's scripts may name next to a slot's; ok is false for a call
// without flow control (groupSize applies).
func flowGroups(name string, keys, argv []any) (groups [][]any, ok bool) {
	arg := func(i int) string {
		if i < len(argv) {
			return fmt.Sprint(argv[i])
		}
		return ""
	}
	// A fetch section's mode with a space names an event log: one more
	// key per group, the slot's events stream.
	flowKeys := func(mode, desc string) (kpg, tk int) {
		ev := 0
		if strings.Contains(mode, " ") {
			ev = 1
		}
		f := strings.Fields(desc)
		if len(f) < 8 {
			return 4 + ev, 0
		}
		kpg = 4 + ev
		if f[0] == "1" {
			kpg = 8 + ev
		}
		if f[4] != "0" || f[6] != "0" {
			np, _ := strconv.Atoi(f[7])
			tk = 1 + np
		}
		return kpg, tk
	}
	switch name {
	case scripts.NameFetch:
		if arg(0) == "M" {
			s, _ := strconv.Atoi(arg(1))
			a, k := 2, 0
			for range s {
				g, _ := strconv.Atoi(arg(a))
				kpg, tk := flowKeys(arg(a+1), arg(a+6))
				for range g {
					groups = append(groups, keys[k:k+kpg])
					k += kpg
				}
				k += tk
				nargs := 7 + g
				if strings.HasPrefix(arg(a+1), "2") {
					nargs += g
				}
				a += nargs
			}
			return groups, true
		}
		kpg, tk := flowKeys(arg(0), arg(5))
		n := len(keys) - tk
		if n%kpg == 1 { // fenced: one group and its epoch key
			return [][]any{append(append([]any{}, keys[:kpg]...), keys[len(keys)-1])}, true
		}
		for k := 0; k < n; k += kpg {
			groups = append(groups, keys[k:k+kpg])
		}
		return groups, true
	case scripts.NameAck:
		k, g := 0, 0
		for len(keys)-k >= 6 {
			// A count ending in "L" marks a life group: six more keys
			// of its slot after the others.
			cs, life := strings.CutSuffix(arg(1+g), "L")
			c, _ := strconv.Atoi(cs)
			g++
			var grp []any
			if c < 0 {
				grp = append(grp, keys[k:k+9]...) // the tenth is the topic's
				k += 10
			} else {
				grp = append(grp, keys[k:k+6]...)
				k += 6
			}
			if life {
				grp = append(grp, keys[k:k+6]...)
				k += 6
			}
			groups = append(groups, grp)
		}
		if k < len(keys) {
			groups[0] = append(append([]any{}, groups[0]...), keys[k])
		}
		return groups, true
	case "sendbatch":
		return SendGroups(5, keys, argv), true
	case "gsend":
		return SendGroups(7, keys, argv), true
	case scripts.NameRollback, scripts.NameSweep:
		// ARGV[2] ending in "L": the slot's six life keys follow the
		// others (before an epoch key).
		nlife := 0
		if strings.HasSuffix(arg(1), "L") {
			nlife = 6
		}
		nk := len(keys) - nlife
		if nk < 11 {
			return nil, false
		}
		g := append([]any{}, keys[:10]...)
		g = append(g, keys[11:11+nlife]...)
		if nk == 12 {
			g = append(g, keys[len(keys)-1])
		}
		return [][]any{g}, true
	}
	return nil, false
}

// SendGroups splits the KEYS of a sendbatch.lua (base 5) or gsend.lua
// (base 7) call into its slot groups: base keys a group, two more for a
// group of unique sends (its type plus 8), one more for a group with an
// event log (its type plus 16, whose header has a third argument); the
// flags above (32 packed, 64 clock) change neither.
func SendGroups(base int, keys, argv []any) [][]any {
	var groups [][]any
	for at, k := 1, 0; k < len(keys); {
		size, hdr := base, 2
		if at < len(argv) {
			typ, _ := strconv.Atoi(fmt.Sprint(argv[at]))
			if typ%16 >= 8 {
				size += 2
			}
			if typ%32 >= 16 {
				size, hdr = size+1, 3
			}
		}
		groups = append(groups, keys[k:min(k+size, len(keys))])
		k += size
		at += hdr
	}
	return groups
}

func (h *KeySlotCheck) fail(msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.bad) < 20 {
		h.bad = append(h.bad, msg)
	}
}

// Seen returns the names of the scripts called so far, sorted.
func (h *KeySlotCheck) Seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for name := range h.calls {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Verify reports every script call whose keys spanned hash slots.
func (h *KeySlotCheck) Verify(t testing.TB) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, b := range h.bad {
		t.Errorf("script call across cluster hash slots: %s", b)
	}
}
