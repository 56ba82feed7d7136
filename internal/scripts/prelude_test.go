package scripts

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A script gets the lib definitions it calls, and what those call, in
// lib.lua's order, and nothing else.
func TestPreludeTakesWhatIsUsed(t *testing.T) {
	p := lib.prelude("local r = send_one(KEYS[1], KEYS[2], KEYS[3], 1, 'id', '0', 1, 'b', 0)")
	for _, want := range []string{"local function send_one(", "local function env_decode(", "local function env_encode(", "local HDR ="} {
		assert.Contains(t, p, want)
	}
	for _, not := range []string{"rollback_one", "wake_if_head", "parse_backoff", "mcall"} {
		assert.NotContains(t, p, "local function "+not)
		assert.NotContains(t, p, "local "+not+" =")
	}
	assert.Less(t, strings.Index(p, "local HDR ="), strings.Index(p, "local function send_one("))
	assert.Empty(t, lib.prelude("return 1"))
	// Every registered script's full text defines what it calls.
	for _, name := range Names() {
		body := mustRead(name)
		full := lib.prelude(body)
		for _, d := range lib {
			if strings.Contains(body, d.name+"(") {
				assert.Contains(t, full, d.text, "%s uses %s", name, d.name)
			}
		}
	}
}
