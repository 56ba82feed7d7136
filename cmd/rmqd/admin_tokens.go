package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// minUserToken is the shortest token a user may choose.
const minUserToken = 20

// maxAdminBody bounds admin request bodies (forms and limit JSON).
const maxAdminBody = 64 << 10

// adminPool resolves a pool name ("" is default); ok false answers 400.
func (s *service) adminPool(w http.ResponseWriter, name string) (string, bool) {
	if name == "" {
		name = defaultPool
	}
	if _, ok := s.pools[name]; !ok {
		writeError(w, http.StatusBadRequest, "the pool was not exists")
		return "", false
	}
	return name, true
}

// createToken is POST /token/{ns}?description=…[&token=…][&pool=…].
func (s *service) createToken(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxAdminBody)
	ns := r.PathValue("ns")
	desc := r.FormValue("description")
	switch {
	case desc == "":
		writeError(w, http.StatusBadRequest, "invalid description")
		return
	case len(ns) > maxNameLength:
		writeError(w, http.StatusBadRequest, "the namespace name was too long")
		return
	case !validName(ns):
		writeError(w, http.StatusBadRequest, "namespace name contains forbidden characters")
		return
	}
	poolName, token := r.FormValue("pool"), r.FormValue("token")
	if token != "" {
		var prefixed string
		if prefixed, token = splitToken(token); poolName == "" {
			poolName = prefixed
		}
	}
	poolName, ok := s.adminPool(w, poolName)
	if !ok {
		return
	}
	if r.Form.Has("token") && len(token) < minUserToken {
		writeError(w, http.StatusBadRequest, "the user token was too short")
		return
	}
	if token == "" {
		token = newToken()
	}
	created, err := s.tokens.create(r.Context(), poolName, ns, token, desc)
	if err != nil {
		s.writeInternal(w, r, err)
		return
	}
	if !created {
		writeError(w, http.StatusBadRequest, "the token has already existed")
		return
	}
	if poolName != defaultPool {
		token = poolName + ":" + token
	}
	writePretty(w, http.StatusCreated, map[string]string{"token": token})
}

// listTokens is GET /token/{ns}[?pool=…]. With a pool parameter every
// token carries its "pool:" prefix, default included (as lmstfy does).
func (s *service) listTokens(w http.ResponseWriter, r *http.Request) {
	given := r.URL.Query().Get("pool")
	poolName, ok := s.adminPool(w, given)
	if !ok {
		return
	}
	toks, err := s.tokens.list(r.Context(), poolName, r.PathValue("ns"))
	if err != nil {
		s.writeInternal(w, r, err)
		return
	}
	if given != "" {
		prefixed := make(map[string]string, len(toks))
		for t, d := range toks {
			prefixed[given+":"+t] = d
		}
		toks = prefixed
	}
	writePretty(w, http.StatusOK, map[string]map[string]string{"tokens": toks})
}

// deleteToken is DELETE /token/{ns}/{[pool:]token}: 204, unknown tokens
// too; the token's limit goes with it.
func (s *service) deleteToken(w http.ResponseWriter, r *http.Request) {
	prefixed, token := splitToken(r.PathValue("token"))
	poolName, ok := s.adminPool(w, prefixed)
	if !ok {
		return
	}
	ns := r.PathValue("ns")
	if err := s.tokens.remove(r.Context(), poolName, ns, token); err != nil {
		s.writeInternal(w, r, err)
		return
	}
	if err := s.limits.remove(r.Context(), poolName, ns, token); err != nil {
		s.writeInternal(w, r, err)
		return
	}
	writeNoContent(w)
}

// limitTarget is the (pool, ns, token) of a limit route.
func (s *service) limitTarget(w http.ResponseWriter, r *http.Request) (tokenRef, bool) {
	prefixed, token := splitToken(r.PathValue("token"))
	poolName, ok := s.adminPool(w, prefixed)
	return tokenRef{poolName, r.PathValue("ns"), token}, ok
}

func (s *service) getLimit(w http.ResponseWriter, r *http.Request) {
	ref, ok := s.limitTarget(w, r)
	if !ok {
		return
	}
	l, found, err := s.limits.get(r.Context(), ref.pool, ref.ns, ref.token)
	if err != nil {
		s.writeInternal(w, r, err)
		return
	}
	if !found {
		writeJSON(w, http.StatusNotFound, nil)
		return
	}
	writeJSON(w, http.StatusOK, l)
}

// The bounds of a limit's numbers (lmstfy has none, and overflowed too):
// an interval of at most a year, at most 2^31-1 requests in it.
const (
	maxLimitInterval = 365 * 24 * 3600
	maxLimitCount    = 1<<31 - 1
	errLimitTooLarge = "invalid limiter: interval at most 31536000 (a year), read and write at most 2147483647"
)

type limiterBody struct {
	Limiter limit `json:"limiter"`
}

// readLimit parses and checks a limit body as lmstfy does, statuses and
// odd bodies included (LMSTFY-API.md §8.2); ok false means answered.
func readLimit(w http.ResponseWriter, r *http.Request) (limit, bool) {
	var l limit
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBody))
	if err == nil {
		err = json.Unmarshal(raw, &l)
	}
	switch {
	case err != nil:
		writeError(w, http.StatusBadRequest, "invalid limiter")
	case l.Read == 0 && l.Write == 0:
		writeJSON(w, http.StatusBadRequest, limiterBody{l})
	case l.Interval == 0:
		writeError(w, http.StatusBadRequest, "interval should be > 0")
	case l.Interval < 0:
		writeError(w, http.StatusInternalServerError, "limiter interval should be > 0")
	case l.Read <= 0 && l.Write <= 0:
		writeError(w, http.StatusInternalServerError, "the read and write of limiter can't be <= 0 at the same time")
	case l.Interval > maxLimitInterval || l.Read > maxLimitCount || l.Write > maxLimitCount:
		// Larger numbers overflowed the throttle's arithmetic (an interval
		// of 2^63-1 s became a negative period: no limit at all).
		writeError(w, http.StatusBadRequest, errLimitTooLarge)
	default:
		return l, true
	}
	return l, false
}

func (s *service) createLimit(w http.ResponseWriter, r *http.Request) {
	s.setLimit(w, r, true)
}

func (s *service) putLimit(w http.ResponseWriter, r *http.Request) {
	s.setLimit(w, r, false)
}

func (s *service) setLimit(w http.ResponseWriter, r *http.Request, onlyNew bool) {
	ref, ok := s.limitTarget(w, r)
	if !ok {
		return
	}
	l, ok := readLimit(w, r)
	if !ok {
		return
	}
	stored, err := s.limits.set(r.Context(), ref.pool, ref.ns, ref.token, l, onlyNew)
	if err != nil {
		s.writeInternal(w, r, err)
		return
	}
	if !stored {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("throttler token(%s) has already exists", ref.token))
		return
	}
	status := http.StatusOK
	if onlyNew {
		status = http.StatusCreated
	}
	writeJSON(w, status, limiterBody{l})
}

func (s *service) deleteLimit(w http.ResponseWriter, r *http.Request) {
	ref, ok := s.limitTarget(w, r)
	if !ok {
		return
	}
	if err := s.limits.remove(r.Context(), ref.pool, ref.ns, ref.token); err != nil {
		s.writeInternal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, msgBody{"success"})
}

// listLimits is GET /limits: every limit of every pool, read from Redis
// (force_update is accepted and changes nothing: there is no stale copy).
func (s *service) listLimits(w http.ResponseWriter, r *http.Request) {
	all, err := s.limits.all(r.Context(), s.poolNames)
	if err != nil {
		s.writeInternal(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, all)
}
