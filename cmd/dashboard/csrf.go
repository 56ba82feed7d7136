package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
)

// CSRF protection of every request that is not a GET or HEAD, in two
// independent checks, both required:
//
//  1. Same origin: the Origin header (or, when a browser sends none, the
//     Referer) names the host the request was sent to.
//  2. A signed double-submit token: a random cookie set by the pages, and a
//     form field holding HMAC-SHA256(key, cookie). A page of another site
//     can neither read the cookie nor forge the signature, and a cookie
//     planted by a sibling subdomain fails the signature check.

const (
	csrfCookie = "rmq_dashboard_csrf"
	csrfField  = "csrf"
	// maxFormBytes bounds the body of an action request.
	maxFormBytes = 4 << 20
)

// csrfToken returns the form token of the request's browser, setting the
// cookie first when the browser has none.
func (h *handler) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) >= 22 {
		return h.sign(c.Value)
	}
	b := make([]byte, 24)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	v := base64.RawURLEncoding.EncodeToString(b)
	path := h.cfg.pathPrefix
	if path == "" {
		path = "/"
	}
	http.SetCookie(w, &http.Cookie{
		Name: csrfCookie, Value: v, Path: path,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	return h.sign(v)
}

func (h *handler) sign(v string) string {
	m := hmac.New(sha256.New, h.cfg.csrfKey)
	m.Write([]byte(v))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkUnsafe applies the read-only mode and both CSRF checks to a request
// that may change something; it answers the request itself when refusing.
func (h *handler) checkUnsafe(w http.ResponseWriter, r *http.Request) bool {
	if h.cfg.readOnly {
		h.fail(w, r, http.StatusForbidden, "the dashboard is read-only")
		return false
	}
	if !sameOrigin(r) {
		h.fail(w, r, http.StatusForbidden, "cross-origin request refused (Origin or Referer must name this host)")
		return false
	}
	// A form names at most maxActionIDs ids: bound what is read.
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, http.StatusBadRequest, "unreadable form: "+err.Error())
		return false
	}
	c, err := r.Cookie(csrfCookie)
	if err != nil {
		h.fail(w, r, http.StatusForbidden, "missing CSRF cookie: reload the page and try again")
		return false
	}
	if !hmac.Equal([]byte(r.PostFormValue(csrfField)), []byte(h.sign(c.Value))) {
		h.fail(w, r, http.StatusForbidden, "invalid CSRF token: reload the page and try again")
		return false
	}
	return true
}

// sameOrigin reports whether a browser sent r from a page of the origin
// it was sent to (CrossSite). A request that says nothing of its origin
// is refused: every browser that could be tricked into sending one sends
// at least one of the headers on a POST (the pages set Referrer-Policy
// same-origin).
func sameOrigin(r *http.Request) bool {
	cross, known := CrossSite(r)
	return known && !cross
}

// CrossSite reports whether a browser sent r from a page of another origin
// than the one r was sent to: its Sec-Fetch-Site header says so, or, from a
// browser that sends none, its Origin header (else its Referer) names
// another host than r.Host. known is false when r carries none of these
// headers: it comes from a program (curl, a client library), not from a
// page, and no page can have made it. A host that serves actions to
// browsers and to programs on one port (rmqd's admin API) refuses cross;
// the dashboard, which serves browsers only, also refuses !known.
//
// Sec-Fetch-Site is set by the browser and cannot be changed by a page;
// it is trusted over Origin, which a proxy that rewrites Host would make
// look foreign. "none" is a request the user made (a bookmark, an address
// typed in), not a page.
func CrossSite(r *http.Request) (cross, known bool) {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return false, true
	case "":
	default: // same-site (another port or subdomain), cross-site
		return true, true
	}
	src := r.Header.Get("Origin")
	if src == "" || src == "null" {
		if ref := r.Header.Get("Referer"); ref != "" {
			src = ref
		}
	}
	if src == "" {
		return false, false
	}
	// "null" (a sandboxed page, a redirect across origins) is no host.
	u, err := url.Parse(src)
	if err != nil || u.Host == "" {
		return true, true
	}
	return u.Host != r.Host, true
}
