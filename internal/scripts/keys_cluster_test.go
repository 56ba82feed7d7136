package scripts_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/scripts"
	"github.com/rmq-go/rmq/luascripts"
)

// On a Redis Cluster a script may only touch keys it names in KEYS (Redis
// routes the call by them and checks that they share a hash slot; a key
// built inside the script may live on another node). The test below reads
// every script (lib.lua followed by the script's own file, as Redis runs
// it) and follows each key argument of each redis.call back to where it
// comes from: KEYS[n] directly, a local assigned from KEYS, a table field
// set from KEYS, or a function parameter that every call site fills with
// one of those. Anything else (a string, a concatenation, ARGV, a function
// result) fails. That the KEYS of one call share one hash tag is checked
// where the calls are made, by the Go tests of the callers (rmq and
// producer run their suites on a cluster with a hook that checks every
// EVAL/EVALSHA).

// keyPositions says which arguments of a command are keys: the first one,
// or all of them. A command not listed fails the test, so a new command
// in a script must be looked at (and added) here.
var keyPositions = map[string]string{
	"TIME": "none",
	"ZADD": "first", "ZREM": "first", "ZSCORE": "first", "ZMSCORE": "first", "ZRANGE": "first", "ZCARD": "first", "ZLEXCOUNT": "first",
	"ZRANGEBYSCORE": "first", "ZREVRANGE": "first", "ZREVRANGEBYSCORE": "first", "ZCOUNT": "first",
	"HGET": "first", "HSCAN": "first", "HSET": "first", "HSETNX": "first", "HDEL": "first", "HEXISTS": "first", "HLEN": "first", "HMGET": "first",
	"GET": "first", "SET": "first", "INCR": "first", "PEXPIRE": "first", "XADD": "first",
	// A plain PUBLISH channel is no key: Redis Cluster routes it to every
	// node (schedule.lua's events); the wake command is checked as a key.
	"PUBLISH": "none", "SPUBLISH": "first",
	"UNLINK": "all", "DEL": "all", "EXISTS": "all",
}

type tok struct {
	kind string // ident, number, string, op
	text string
}

// lexLua splits Lua source into tokens, dropping comments and whitespace.
func lexLua(src string) ([]tok, error) {
	var out []tok
	longBracket := func(i int) (level int, ok bool) {
		if src[i] != '[' {
			return 0, false
		}
		j := i + 1
		for j < len(src) && src[j] == '=' {
			j++
		}
		if j < len(src) && src[j] == '[' {
			return j - i - 1, true
		}
		return 0, false
	}
	skipLong := func(i, level int) (int, error) {
		closer := "]" + strings.Repeat("=", level) + "]"
		j := strings.Index(src[i:], closer)
		if j < 0 {
			return 0, fmt.Errorf("unclosed long bracket at %d", i)
		}
		return i + j + len(closer), nil
	}
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case strings.HasPrefix(src[i:], "--"):
			if level, ok := longBracket(i + 2); i+2 < len(src) && ok {
				j, err := skipLong(i+2, level)
				if err != nil {
					return nil, err
				}
				i = j
			} else if nl := strings.IndexByte(src[i:], '\n'); nl >= 0 {
				i += nl + 1
			} else {
				i = len(src)
			}
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(src) && src[j] != c {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(src) {
				return nil, fmt.Errorf("unclosed string at %d", i)
			}
			out = append(out, tok{"string", src[i+1 : j]})
			i = j + 1
		case c == '[':
			if level, ok := longBracket(i); ok {
				j, err := skipLong(i, level)
				if err != nil {
					return nil, err
				}
				out = append(out, tok{"string", src[i:j]})
				i = j
			} else {
				out = append(out, tok{"op", "["})
				i++
			}
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(src) && (src[j] == '_' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' || src[j] >= '0' && src[j] <= '9') {
				j++
			}
			out = append(out, tok{"ident", src[i:j]})
			i = j
		case c >= '0' && c <= '9':
			j := i
			for j < len(src) && (src[j] >= '0' && src[j] <= '9' || src[j] == '.' || src[j] == 'x' || src[j] >= 'a' && src[j] <= 'f' || src[j] >= 'A' && src[j] <= 'F') {
				j++
			}
			out = append(out, tok{"number", src[i:j]})
			i = j
		default:
			op := string(c)
			for _, two := range []string{"..", "==", "~=", "<=", ">="} {
				if strings.HasPrefix(src[i:], two) {
					op = two
				}
			}
			if strings.HasPrefix(src[i:], "...") {
				op = "..."
			}
			out = append(out, tok{"op", op})
			i += len(op)
		}
	}
	return out, nil
}

// luaFunc is a function definition: its name, parameters and body tokens.
type luaFunc struct {
	name       string
	params     []string
	start, end int // body token range
}

// keyFlow checks the key arguments of every redis.call of a script.
type keyFlow struct {
	toks  []tok
	funcs []luaFunc
	seen  map[string]bool
	errs  []string
	calls int // redis.call sites checked
}

func newKeyFlow(src string) (*keyFlow, error) {
	toks, err := lexLua(src)
	if err != nil {
		return nil, err
	}
	f := &keyFlow{toks: toks, seen: map[string]bool{}}
	for i := 0; i+2 < len(toks); i++ {
		if toks[i].text != "function" || toks[i+1].kind != "ident" || toks[i+2].text != "(" {
			continue
		}
		fn := luaFunc{name: toks[i+1].text}
		j := i + 3
		for ; toks[j].text != ")"; j++ {
			if toks[j].kind == "ident" {
				fn.params = append(fn.params, toks[j].text)
			}
		}
		fn.start = j + 1
		fn.end = f.blockEnd(fn.start)
		f.funcs = append(f.funcs, fn)
	}
	return f, nil
}

// blockEnd returns the index of the "end" that closes the block opened
// just before i (a function body).
func (f *keyFlow) blockEnd(i int) int {
	depth := 1
	for ; i < len(f.toks); i++ {
		if f.toks[i].kind != "ident" {
			continue
		}
		switch f.toks[i].text {
		case "function", "if", "do", "repeat":
			depth++
		case "end", "until":
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return len(f.toks)
}

// scope returns the innermost function around token i, or nil (main chunk).
func (f *keyFlow) scope(i int) *luaFunc {
	var in *luaFunc
	for k := range f.funcs {
		fn := &f.funcs[k]
		if i >= fn.start && i < fn.end && (in == nil || fn.start > in.start) {
			in = fn
		}
	}
	return in
}

// args splits the argument list of the call whose "(" is at i into token
// ranges; it returns them and the index of the closing ")".
func (f *keyFlow) args(i int) ([][2]int, int) {
	var out [][2]int
	depth, from := 0, i+1
	for j := i; j < len(f.toks); j++ {
		switch f.toks[j].text {
		case "(", "{", "[":
			depth++
		case ")", "}", "]":
			depth--
			if depth == 0 {
				if j > from {
					out = append(out, [2]int{from, j})
				}
				return out, j
			}
		case ",":
			if depth == 1 {
				out = append(out, [2]int{from, j})
				from = j + 1
			}
		}
	}
	return out, len(f.toks)
}

func (f *keyFlow) text(r [2]int) string {
	var parts []string
	for _, t := range f.toks[r[0]:r[1]] {
		if t.kind == "string" {
			parts = append(parts, "'"+t.text+"'")
		} else {
			parts = append(parts, t.text)
		}
	}
	return strings.Join(parts, " ")
}

func (f *keyFlow) failf(format string, a ...any) { f.errs = append(f.errs, fmt.Sprintf(format, a...)) }

func (f *keyFlow) check() {
	for i := 0; i+3 < len(f.toks); i++ {
		if f.toks[i].text != "redis" || f.toks[i+1].text != "." || (f.toks[i+2].text != "call" && f.toks[i+2].text != "pcall") || f.toks[i+3].text != "(" {
			continue
		}
		f.calls++
		args, _ := f.args(i + 3)
		if len(args) == 0 {
			f.failf("redis.call without arguments at token %d", i)
			continue
		}
		positions := "first" // a computed command: the wake command, PUBLISH or SPUBLISH
		if cmd := f.toks[args[0][0]]; args[0][1]-args[0][0] == 1 && cmd.kind == "string" {
			var ok bool
			if positions, ok = keyPositions[strings.ToUpper(cmd.text)]; !ok {
				f.failf("redis.call(%s): command not known to this test; add its key positions", f.text(args[0]))
				continue
			}
		}
		var keys [][2]int
		switch positions {
		case "first":
			if len(args) < 2 {
				f.failf("redis.call(%s) without a key", f.text(args[0]))
				continue
			}
			keys = args[1:2]
		case "all":
			keys = args[1:]
		}
		for _, k := range keys {
			f.mustBeKey(f.scope(i), k, "redis.call("+f.text(args[0])+", "+f.text(k)+", ...)")
		}
	}
}

// mustBeKey checks that the expression r, in function fn (nil: main
// chunk), always holds a key named in KEYS.
func (f *keyFlow) mustBeKey(fn *luaFunc, r [2]int, why string) {
	t := f.toks[r[0]:r[1]]
	name := "main"
	if fn != nil {
		name = fn.name
	}
	memo := name + "|" + f.text(r)
	if f.seen[memo] {
		return
	}
	f.seen[memo] = true
	switch {
	case len(t) == 4 && t[0].text == "KEYS" && t[1].text == "[" && t[2].kind == "number" && t[3].text == "]":
		return
	case len(t) >= 4 && t[0].text == "KEYS" && t[1].text == "[" && t[len(t)-1].text == "]" && arithmetic(t[2:len(t)-1]):
		// KEYS[3 * g - 2], KEYS[g], KEYS[kb[g] + 2], KEYS[#KEYS]: a slot
		// group's key in a multi-group call, or the last key.
		return
	case len(t) == 1 && t[0].kind == "ident":
		f.identIsKey(fn, t[0].text, "", why)
	case len(t) == 3 && t[0].kind == "ident" && t[1].text == "." && t[2].kind == "ident":
		f.identIsKey(fn, t[0].text, t[2].text, why)
	default:
		f.failf("%s: in %s, %q is not a key from KEYS", why, name, f.text(r))
	}
}

// arithmetic reports whether t is an index expression of numbers, names,
// arithmetic operators and indexes into tables of numbers (kb[g]: where a
// group's keys begin) only (no call or concatenation, nothing of ARGV);
// #KEYS, the number of keys, is the one use of KEYS allowed.
func arithmetic(t []tok) bool {
	for i, x := range t {
		switch {
		case x.kind == "number", x.kind == "ident" && x.text != "KEYS" && x.text != "ARGV":
		case x.kind == "ident" && x.text == "KEYS" && i > 0 && t[i-1].text == "#":
		case x.kind == "op" && strings.Contains("+-*()[]#.", x.text):
		default:
			return false
		}
	}
	return true
}

// identIsKey checks that identifier id (or its field, when field is not
// empty) in function fn holds a key from KEYS: as a parameter, through
// every call site of fn; as a local, through every assignment to it.
func (f *keyFlow) identIsKey(fn *luaFunc, id, field, why string) {
	if fn != nil {
		for p, param := range fn.params {
			if param != id {
				continue
			}
			for i := 0; i+1 < len(f.toks); i++ {
				if f.toks[i].text != fn.name || f.toks[i+1].text != "(" || (i > 0 && f.toks[i-1].text == "function") {
					continue
				}
				args, _ := f.args(i + 1)
				if p >= len(args) {
					f.failf("%s: %s called without argument %d (%s)", why, fn.name, p+1, id)
					continue
				}
				f.fieldIsKey(f.scope(i), args[p], field, why)
			}
			return
		}
	}
	// A local (or a global of the main chunk) assigned in this scope.
	found := false
	from, to := 0, len(f.toks)
	if fn != nil {
		from, to = fn.start, fn.end
	}
	for i := from; i+2 < to; i++ {
		if f.toks[i].text != id || f.toks[i+1].text != "=" || (i > 0 && strings.Contains(",.{", f.toks[i-1].text)) {
			continue
		}
		if f.scope(i) != fn {
			continue
		}
		found = true
		end := f.exprEnd(i + 2)
		f.fieldIsKey(fn, [2]int{i + 2, end}, field, why)
	}
	if !found {
		f.failf("%s: %s is neither a parameter nor assigned in %s", why, id, scopeName(fn))
	}
}

func scopeName(fn *luaFunc) string {
	if fn == nil {
		return "the main chunk"
	}
	return fn.name
}

// fieldIsKey checks expression r: a key itself (field ""), or a table
// whose field holds a key.
func (f *keyFlow) fieldIsKey(fn *luaFunc, r [2]int, field, why string) {
	if field == "" {
		f.mustBeKey(fn, r, why)
		return
	}
	t := f.toks[r[0]:r[1]]
	switch {
	case len(t) == 1 && t[0].kind == "ident":
		f.identIsKey(fn, t[0].text, field, why)
	case len(t) > 0 && t[0].text == "{":
		args, _ := f.args(r[0])
		for _, a := range args {
			if a[1]-a[0] >= 3 && f.toks[a[0]].text == field && f.toks[a[0]+1].text == "=" {
				f.mustBeKey(fn, [2]int{a[0] + 2, a[1]}, why)
				return
			}
		}
		f.failf("%s: table %s has no field %s", why, f.text(r), field)
	default:
		f.failf("%s: %q is not a table of keys", why, f.text(r))
	}
}

// exprEnd returns the end of the expression starting at i: the next token
// at depth 0 that starts a statement or ends the line's expression.
func (f *keyFlow) exprEnd(i int) int {
	depth := 0
	for j := i; j < len(f.toks); j++ {
		t := f.toks[j]
		switch t.text {
		case "(", "{", "[":
			depth++
		case ")", "}", "]":
			depth--
			if depth < 0 {
				return j
			}
		}
		if depth > 0 || j == i {
			continue
		}
		if t.kind == "ident" {
			switch t.text {
			case "local", "if", "for", "while", "return", "end", "redis", "else", "elseif", "then", "do":
				return j
			}
			// A new statement: an identifier right after a complete operand.
			prev := f.toks[j-1]
			if prev.kind != "op" || prev.text == ")" || prev.text == "}" || prev.text == "]" {
				return j
			}
		}
	}
	return len(f.toks)
}

// libraries returns the text of every library the scripts are prepended
// with, in their order.
func libraries(t *testing.T) string {
	t.Helper()
	var all []string
	for _, name := range []string{"lib", "flowlib", "grouplib"} {
		src, err := luascripts.Source(name)
		require.NoError(t, err)
		all = append(all, src)
	}
	return strings.Join(all, "\n")
}

func TestEveryScriptKeyComesFromKEYS(t *testing.T) {
	lib := libraries(t)
	names := scripts.Names()
	require.NotEmpty(t, names)
	total := 0
	for _, name := range names {
		src, err := luascripts.Source(name)
		require.NoError(t, err)
		f, err := newKeyFlow(lib + "\n" + src)
		require.NoError(t, err, name)
		f.check()
		assert.Empty(t, f.errs, "%s", name)
		assert.Positive(t, f.calls, name)
		total += f.calls
	}
	t.Logf("%d scripts, %d redis.call sites (lib counted with each)", len(names), total)
}

// The checker itself finds keys that do not come from KEYS.
func TestKeyFlowCatchesBuiltKeys(t *testing.T) {
	bad := map[string]string{
		"literal":       `redis.call('GET', 'rmq:topics')`,
		"concatenation": `redis.call('HGET', KEYS[1] .. ':x', 'f')`,
		"argv":          `redis.call('ZADD', ARGV[1], 1, 'm')`,
		"local from argv": `local k = ARGV[2]
redis.call('ZREM', k, 'm')`,
		"param fed by argv": `local function f(a, key) return redis.call('GET', key) end
f(1, KEYS[1])
f(2, ARGV[1])`,
		"table field": `local k = { store = KEYS[1], msg = 'x' .. KEYS[2] }
local function g(t) redis.call('HDEL', t.msg, 'id') end
g(k)`,
		"all keys":        `redis.call('UNLINK', KEYS[1], 'other')`,
		"index from argv": `redis.call('GET', KEYS[ARGV[1]])`,
		"two keys joined": `redis.call('GET', KEYS[1] .. KEYS[2])`,
		"unknown command": `redis.call('KEYS', '*')`,
		"computed cmd":    `redis.call(ARGV[1], ARGV[2], 'x')`,
	}
	for name, src := range bad {
		f, err := newKeyFlow(src)
		require.NoError(t, err, name)
		f.check()
		assert.NotEmpty(t, f.errs, "%s: not caught", name)
	}
	good := `local k = { store = KEYS[1], wake = KEYS[2] }
local function wake(cmd, ch, s) if cmd ~= '' then redis.call(cmd, ch, s) end end
local function one(k, id) redis.call('ZREM', k.store, id); wake(ARGV[1], k.wake, 1) end
local store = KEYS[1]
one(k, ARGV[2])
redis.call('UNLINK', KEYS[1], store)
local t = redis.call('TIME')
for g = 1, #KEYS / 2 do redis.call('ZREM', KEYS[2 * g - 1], 'm') end`
	f, err := newKeyFlow(good)
	require.NoError(t, err)
	f.check()
	assert.Empty(t, f.errs)
	assert.Equal(t, 5, f.calls)

	// Mutations of the real scripts are caught too.
	lib := libraries(t)
	for _, m := range []struct{ script, file, from, to string }{
		{"ack", "lib", "redis.call('GET', key)", "redis.call('GET', 'x' .. key)"},
		{"sendbatch", "sendbatch", "local msg = KEYS[b + 3]", "local msg = ARGV[b + 3]"},
		{"sendbatch", "sendbatch", "uniq = KEYS[b + 6]", "uniq = ARGV[b + 6]"},
		{"sendbatch", "lib", "redis.call('HSET', u.uniqn, id, nonce)", "redis.call('HSET', u.uniqn .. id, id, nonce)"},
		{"rollback", "rollback", "prepare = KEYS[2]", "prepare = ARGV[2]"},
		{"fetch", "fetch", "redis.call('ZMSCORE', KEYS[kb[g] + 2], unpack(ids))", "redis.call('ZMSCORE', KEYS[kb[g] + 2] .. 'x', unpack(ids))"},
		{"fetch", "fetch", "redis.call('ZCARD', KEYS[tk + 1 + i])", "redis.call('ZCARD', KEYS[ARGV[tk + 1 + i]])"},
		{"ack", "ack", "mcall('HDEL', KEYS[b + 3], gone)", "mcall('HDEL', ARGV[3], gone)"},
		{"ack", "flowlib", "redis.call('ZREM', k.gocc, grp .. '\\0' .. id)", "redis.call('ZREM', k.gocc .. grp, grp .. '\\0' .. id)"},
		{"gsend", "gsend", "gq = KEYS[b + 6]", "gq = ARGV[b + 6]"},
	} {
		src, err := luascripts.Source(m.script)
		require.NoError(t, err)
		l := lib
		if strings.HasSuffix(m.file, "lib") {
			require.Contains(t, l, m.from)
			l = strings.Replace(l, m.from, m.to, 1)
		} else {
			require.Contains(t, src, m.from)
			src = strings.Replace(src, m.from, m.to, 1)
		}
		f, err := newKeyFlow(l + "\n" + src)
		require.NoError(t, err)
		f.check()
		assert.NotEmpty(t, f.errs, "%s with %q: not caught", m.script, m.to)
	}
}
