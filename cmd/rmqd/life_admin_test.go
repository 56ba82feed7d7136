package main

import (
	"net/http"
	"testing"
)

// GET/PUT/DELETE /queue/NS/Q/lifecycle read, replace and clear a queue's
// lifecycle settings; out of bounds is a 400 that changes nothing.
func TestQueueLifecycleRoute(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	path := e.admin.URL + "/queue/ns/q/lifecycle"
	requireError(t, do(t, "GET", path, ""), http.StatusNotFound, "queue not found")
	requireError(t, do(t, "PUT", path, `{"events":1}`), http.StatusNotFound, "queue not found")
	e.publish(tok, "ns", "q", "", "x")

	a := do(t, "GET", path, "")
	if a.status != http.StatusOK || string(a.body) != `{"retention_ms":0,"events":0}` {
		t.Fatalf("fresh queue: %s", a)
	}
	a = do(t, "PUT", path, `{"retention_ms":60000,"events":500}`)
	if a.status != http.StatusOK || string(a.body) != `{"retention_ms":60000,"events":500}` {
		t.Fatalf("put: %s", a)
	}
	for _, bad := range []string{`{"retention_ms":-1}`, `{"events":-1}`, `{"retention_ms":2592000001}`, `{"events":10000001}`, `nope`, `{"events":"x"}`} {
		a = do(t, "PUT", path, bad)
		if a.status != http.StatusBadRequest {
			t.Fatalf("%s: %s", bad, a)
		}
	}
	a = do(t, "GET", path, "")
	if string(a.body) != `{"retention_ms":60000,"events":500}` {
		t.Fatalf("the refused puts changed it: %s", a)
	}
	if a = do(t, "DELETE", path, ""); a.status != http.StatusNoContent {
		t.Fatalf("delete: %s", a)
	}
	a = do(t, "GET", path, "")
	if string(a.body) != `{"retention_ms":0,"events":0}` {
		t.Fatalf("after delete: %s", a)
	}
}
