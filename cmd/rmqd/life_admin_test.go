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

// progress and cancel take a unit of the token's write limit, events and
// wait of its read limit; a refused request (404) gives its unit back.
func TestLifeRoutesThrottled(t *testing.T) {
	e := newEnv(t)
	tok := e.token("ns")
	hdr := "X-Token: " + tok
	id := e.publish(tok, "ns", "q", "", "x")
	other := e.publish(tok, "ns", "q", "", "y")
	a := do(t, "POST", e.admin.URL+"/token/ns/"+tok+"/limit", `{"read":1,"write":1,"interval":60}`)
	if a.status != http.StatusCreated {
		t.Fatalf("limit: %s", a)
	}
	refusedWrite := `{"msg":"token(` + tok + `) produce reach the limit rate, please retry later"}`
	refusedRead := `{"msg":"token(` + tok + `) consume reach the limit rate, please retry later"}`

	requireError(t, do(t, "POST", e.url("/api/ns/q/job/nope/cancel"), "", hdr), http.StatusNotFound, "job not found")
	if a = do(t, "POST", e.url("/api/ns/q/job/"+id+"/cancel"), "", hdr); a.status != http.StatusOK {
		t.Fatalf("the 404 gave its unit back: %s", a)
	}
	a = do(t, "POST", e.url("/api/ns/q/job/"+other+"/cancel"), "", hdr)
	if a.status != http.StatusTooManyRequests || string(a.body) != refusedWrite {
		t.Fatalf("second cancel: %s", a)
	}
	a = do(t, "PUT", e.url("/api/ns/q/job/"+other+"/progress"), "p", hdr)
	if a.status != http.StatusTooManyRequests || string(a.body) != refusedWrite {
		t.Fatalf("progress: %s", a)
	}

	if a = do(t, "GET", e.url("/api/ns/q/job/"+other+"/wait"), "", hdr); a.status != http.StatusOK {
		t.Fatalf("wait: %s", a)
	}
	a = do(t, "GET", e.url("/api/ns/q/job/"+other+"/wait"), "", hdr)
	if a.status != http.StatusTooManyRequests || string(a.body) != refusedRead {
		t.Fatalf("second wait: %s", a)
	}
	_, a = e.openEvents("/api/ns/q/events", hdr)
	if a.status != http.StatusTooManyRequests || string(a.body) != refusedRead {
		t.Fatalf("events: %s", a)
	}
	if a = do(t, "GET", e.url("/api/ns/q/job/"+other), "", hdr); a.status != http.StatusOK {
		t.Fatalf("GET job is not throttled, as lmstfy's peek: %s", a)
	}
}
