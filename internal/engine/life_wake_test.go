package engine

import "testing"

// A cancel's wake payload, "x<token>:<id>" (cancel.lua), is its own kind,
// and its id may hold any byte, a colon too.
func TestParseCancelWake(t *testing.T) {
	if k, _ := parseWake("x1700000000001:a:b"); k != wakeCancel {
		t.Fatalf("kind %d, want wakeCancel", k)
	}
	token, id, ok := parseCancel("x1700000000001:a:b")
	if !ok || token != 1700000000001 || id != "a:b" {
		t.Fatalf("parseCancel = %d %q %v", token, id, ok)
	}
	for _, p := range []string{"x12", "xq:id", "12:id", "x"} {
		if _, _, ok := parseCancel(p); ok {
			t.Errorf("parseCancel(%q) read a cancel", p)
		}
	}
}
