package dashboard_test

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/topic"
)

// ?flash= put any text on a dashboard page, so a link made elsewhere
// could show an operator a message of its choosing ("Session expired,
// call …"). A page shows only the flash messages the dashboard's own
// actions signed.
func TestFlashOnlyFromActions(t *testing.T) {
	e := newEnv(t)
	tp := e.topic("orders", topic.FixedTime, 1)
	e.makeDead(tp, "boom", "a", "x")
	loc := e.actLoc(url.Values{"op": {"delete"}, "topic": {"orders"}, "id": {"a"}, "return": {"topic?name=orders"}})
	require.Equal(t, "Deleted 1 dead message.", loc.Query().Get("flash"))
	assert.Contains(t, e.get(loc.String()), `<p class="flash" id="flash">Deleted 1 dead message.</p>`)

	evil := "Your session expired: call +1 555 0100"
	forged := loc.Query()
	forged.Set("flash", evil)
	for _, q := range []string{"name=orders&flash=" + url.QueryEscape(evil), forged.Encode()} {
		page := e.get("topic?" + q)
		assert.NotContains(t, page, "555 0100", q)
		assert.NotContains(t, page, `id="flash"`, q)
	}
}
