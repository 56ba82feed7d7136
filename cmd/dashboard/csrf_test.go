package dashboard_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rmq-go/rmq/cmd/dashboard"
)

func TestCrossSite(t *testing.T) {
	for _, c := range []struct {
		name        string
		hdr         map[string]string
		cross, know bool
	}{
		{"a program", nil, false, false},
		{"same origin", map[string]string{"Origin": "http://rmq.test:7778"}, false, true},
		{"same origin by referer", map[string]string{"Referer": "http://rmq.test:7778/dashboard/"}, false, true},
		{"null origin, same referer", map[string]string{"Origin": "null", "Referer": "http://rmq.test:7778/x"}, false, true},
		{"other port", map[string]string{"Origin": "http://rmq.test:9999"}, true, true},
		{"other host", map[string]string{"Origin": "http://evil.test:7778"}, true, true},
		{"other referer", map[string]string{"Referer": "http://evil.test/"}, true, true},
		{"null origin", map[string]string{"Origin": "null"}, true, true},
		{"junk origin", map[string]string{"Origin": "::"}, true, true},
		// The browser's word wins over a Host a proxy rewrote.
		{"fetch: same origin", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "https://public.test"}, false, true},
		{"fetch: typed in", map[string]string{"Sec-Fetch-Site": "none"}, false, true},
		{"fetch: same site", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://rmq.test:7778"}, true, true},
		{"fetch: cross site", map[string]string{"Sec-Fetch-Site": "cross-site"}, true, true},
	} {
		r := httptest.NewRequest(http.MethodPost, "http://rmq.test:7778/token/ns", nil)
		for k, v := range c.hdr {
			r.Header.Set(k, v)
		}
		cross, known := dashboard.CrossSite(r)
		assert.Equal(t, c.cross, cross, c.name)
		assert.Equal(t, c.know, known, c.name)
	}
}
