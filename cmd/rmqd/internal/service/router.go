package service

import (
	"net/http"
	"net/url"
	"strings"
)

// APIRouter matches the API listener's routes. It does what ServeMux does
// for these patterns (a {name} is one non-empty escaped segment, unescaped;
// a GET route answers HEAD too), but matches a request once and hands the
// handler its segments directly: ServeMux, behind the wrapper that needs
// the pattern before the handler runs, matched every request twice. It
// never redirects and never answers 405: whatever does not match is the
// listener's 404, as in lmstfy. (The consume route refuses HEAD with a
// 405 itself, auth.go: a consume is not a read.)
type APIRouter struct {
	routes []apiRoute
}

// apiRoute is one route: pattern as ServeMux writes it (the metrics'
// label), method and the path's segments after "/api/{ns}/{q}".
type apiRoute struct {
	pattern string
	method  string
	q       string   // a literal queue segment ("flows"); "" for {q}
	rest    []string // literal segments, "" for the {id} wildcard
	h       queueRoute
}

// queueRoute serves a matched queue route; ns, q and id are unescaped.
type queueRoute func(w http.ResponseWriter, r *http.Request, ns, q, id string)

// Handle adds a route; pattern is "METHOD /api/{ns}/{q}[/...]", or
// "METHOD /api/{ns}/NAME" for a route of the namespace (POST …/flows),
// which is matched before {q} routes and served with q = NAME.
func (rt *APIRouter) Handle(pattern string, h queueRoute) {
	method, path, _ := strings.Cut(pattern, " ")
	segs := strings.Split(strings.TrimPrefix(path, "/api/{ns}/"), "/")
	q, rest := segs[0], segs[1:]
	if q == "{q}" {
		q = ""
	}
	for i, s := range rest {
		if strings.HasPrefix(s, "{") {
			rest[i] = ""
		}
	}
	rt.routes = append(rt.routes, apiRoute{pattern: pattern, method: method, q: q, rest: rest, h: h})
}

// maxSegments is the most segments after "/api/" of any route
// ({ns}/{q}/job/{id}/nack).
const maxSegments = 5

// match returns the route of r and its ns, q and id, or nil.
func (rt *APIRouter) match(r *http.Request) (route *apiRoute, ns, q, id string) {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/api/")
	if !ok {
		return nil, "", "", ""
	}
	var buf [maxSegments + 1]string
	segs := buf[:0]
	for len(segs) <= maxSegments {
		seg, more, found := strings.Cut(rest, "/")
		segs = append(segs, seg)
		if !found {
			break
		}
		rest = more
	}
	if len(segs) < 2 || len(segs) > maxSegments || segs[0] == "" || segs[1] == "" {
		return nil, "", "", ""
	}
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	extra := segs[2:]
	for i := range rt.routes {
		rr := &rt.routes[i]
		if rr.method != method || len(rr.rest) != len(extra) || rr.q != "" && rr.q != segs[1] {
			continue
		}
		matched := true
		wild := ""
		for j, lit := range rr.rest {
			switch {
			case lit == "" && extra[j] != "":
				wild = extra[j]
			case lit == "" || lit != extra[j]:
				matched = false
			}
		}
		if !matched {
			continue
		}
		var okNS, okQ, okID bool
		ns, okNS = unescapeSegment(segs[0])
		q, okQ = unescapeSegment(segs[1])
		id, okID = unescapeSegment(wild)
		if !okNS || !okQ || !okID {
			return nil, "", "", ""
		}
		return rr, ns, q, id
	}
	return nil, "", "", ""
}

// unescapeSegment unescapes one path segment; most have nothing to undo.
func unescapeSegment(s string) (string, bool) {
	if strings.IndexByte(s, '%') < 0 {
		return s, true
	}
	u, err := url.PathUnescape(s)
	return u, err == nil
}
