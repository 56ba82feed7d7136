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
var groupSize = map[string]int{"sendbatch": 5, scripts.NameFetch: 4, scripts.NameAck: 6, "confirm": 1, "release": 4}

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
