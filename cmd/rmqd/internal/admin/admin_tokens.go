package admin

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/ids"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/auth"
)

// minUserToken is the shortest token a user may choose.
const minUserToken = 20

// maxAdminBody bounds admin request bodies (forms and limit JSON).
const maxAdminBody = 64 << 10

// adminPool resolves a pool name ("" is default); ok false answers 400.
func (s *handlers) adminPool(w http.ResponseWriter, name string) (string, bool) {
	if name == "" {
		name = names.DefaultPool
	}
	if _, ok := s.Pools[name]; !ok {
		respond.WriteError(w, http.StatusBadRequest, "the pool was not exists")
		return "", false
	}
	return name, true
}

// createToken is POST /token/{ns}?description=…[&token=…][&pool=…].
func (s *handlers) createToken(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxAdminBody)
	ns := r.PathValue("ns")
	desc := r.FormValue("description")
	switch {
	case desc == "":
		respond.WriteError(w, http.StatusBadRequest, "invalid description")
		return
	case len(ns) > names.MaxNameLength:
		respond.WriteError(w, http.StatusBadRequest, "the namespace name was too long")
		return
	case !names.ValidName(ns):
		respond.WriteError(w, http.StatusBadRequest, "namespace name contains forbidden characters")
		return
	}
	poolName, token := r.FormValue("pool"), r.FormValue("token")
	if token != "" {
		var prefixed string
		if prefixed, token = names.SplitToken(token); poolName == "" {
			poolName = prefixed
		}
	}
	poolName, ok := s.adminPool(w, poolName)
	if !ok {
		return
	}
	if r.Form.Has("token") && len(token) < minUserToken {
		respond.WriteError(w, http.StatusBadRequest, "the user token was too short")
		return
	}
	if token == "" {
		token = ids.NewToken()
	}
	created, err := s.Tokens.Create(r.Context(), poolName, ns, token, desc)
	if err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	if !created {
		respond.WriteError(w, http.StatusBadRequest, "the token has already existed")
		return
	}
	if poolName != names.DefaultPool {
		token = poolName + ":" + token
	}
	respond.WritePretty(w, http.StatusCreated, map[string]string{"token": token})
}

// listTokens is GET /token/{ns}[?pool=…]. With a pool parameter every
// token carries its "pool:" prefix, default included (as lmstfy does).
func (s *handlers) listTokens(w http.ResponseWriter, r *http.Request) {
	given := r.URL.Query().Get("pool")
	poolName, ok := s.adminPool(w, given)
	if !ok {
		return
	}
	toks, err := s.Tokens.List(r.Context(), poolName, r.PathValue("ns"))
	if err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	if given != "" {
		prefixed := make(map[string]string, len(toks))
		for t, d := range toks {
			prefixed[given+":"+t] = d
		}
		toks = prefixed
	}
	respond.WritePretty(w, http.StatusOK, map[string]map[string]string{"tokens": toks})
}

// deleteToken is DELETE /token/{ns}/{[pool:]token}: 204, unknown tokens
// too; the token's limit goes with it.
func (s *handlers) deleteToken(w http.ResponseWriter, r *http.Request) {
	prefixed, token := names.SplitToken(r.PathValue("token"))
	poolName, ok := s.adminPool(w, prefixed)
	if !ok {
		return
	}
	ns := r.PathValue("ns")
	if err := s.Tokens.Remove(r.Context(), poolName, ns, token); err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	if err := s.Limits.Remove(r.Context(), poolName, ns, token); err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	respond.WriteNoContent(w)
}

// limitTarget is the (pool, ns, token) of a limit route.
func (s *handlers) limitTarget(w http.ResponseWriter, r *http.Request) (auth.TokenRef, bool) {
	prefixed, token := names.SplitToken(r.PathValue("token"))
	poolName, ok := s.adminPool(w, prefixed)
	return auth.NewTokenRef(poolName, r.PathValue("ns"), token), ok
}

func (s *handlers) getLimit(w http.ResponseWriter, r *http.Request) {
	ref, ok := s.limitTarget(w, r)
	if !ok {
		return
	}
	l, found, err := s.Limits.Get(r.Context(), ref.Pool, ref.Ns, ref.Token)
	if err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	if !found {
		respond.WriteJSON(w, http.StatusNotFound, nil)
		return
	}
	respond.WriteJSON(w, http.StatusOK, l)
}

// The bounds of a limit's numbers (lmstfy has none, and overflowed too):
// an interval of at most a year, at most 2^31-1 requests in it.
const (
	MaxLimitInterval = 365 * 24 * 3600
	maxLimitCount    = 1<<31 - 1
	ErrLimitTooLarge = "invalid limiter: interval at most 31536000 (a year), read and write at most 2147483647"
)

type limiterBody struct {
	Limiter auth.Limit `json:"limiter"`
}

// readLimit parses and checks a limit body as lmstfy does, statuses and
// odd bodies included (LMSTFY-API.md §8.2); ok false means answered.
func readLimit(w http.ResponseWriter, r *http.Request) (auth.Limit, bool) {
	var l auth.Limit
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBody))
	if err == nil {
		err = json.Unmarshal(raw, &l)
	}
	switch {
	case err != nil:
		respond.WriteError(w, http.StatusBadRequest, "invalid limiter")
	case l.Read == 0 && l.Write == 0:
		respond.WriteJSON(w, http.StatusBadRequest, limiterBody{l})
	case l.Interval == 0:
		respond.WriteError(w, http.StatusBadRequest, "interval should be > 0")
	case l.Interval < 0:
		respond.WriteError(w, http.StatusInternalServerError, "limiter interval should be > 0")
	case l.Read <= 0 && l.Write <= 0:
		respond.WriteError(w, http.StatusInternalServerError, "the read and write of limiter can't be <= 0 at the same time")
	case l.Interval > MaxLimitInterval || l.Read > maxLimitCount || l.Write > maxLimitCount:
		// Larger numbers overflowed the throttle's arithmetic (an interval
		// of 2^63-1 s became a negative period: no limit at all).
		respond.WriteError(w, http.StatusBadRequest, ErrLimitTooLarge)
	default:
		return l, true
	}
	return l, false
}

func (s *handlers) createLimit(w http.ResponseWriter, r *http.Request) {
	s.setLimit(w, r, true)
}

func (s *handlers) putLimit(w http.ResponseWriter, r *http.Request) {
	s.setLimit(w, r, false)
}

func (s *handlers) setLimit(w http.ResponseWriter, r *http.Request, onlyNew bool) {
	ref, ok := s.limitTarget(w, r)
	if !ok {
		return
	}
	l, ok := readLimit(w, r)
	if !ok {
		return
	}
	stored, err := s.Limits.Set(r.Context(), ref.Pool, ref.Ns, ref.Token, l, onlyNew)
	if err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	if !stored {
		respond.WriteError(w, http.StatusInternalServerError, fmt.Sprintf("throttler token(%s) has already exists", ref.Token))
		return
	}
	status := http.StatusOK
	if onlyNew {
		status = http.StatusCreated
	}
	respond.WriteJSON(w, status, limiterBody{l})
}

func (s *handlers) deleteLimit(w http.ResponseWriter, r *http.Request) {
	ref, ok := s.limitTarget(w, r)
	if !ok {
		return
	}
	if err := s.Limits.Remove(r.Context(), ref.Pool, ref.Ns, ref.Token); err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	respond.WriteJSON(w, http.StatusOK, respond.MsgBody{Msg: "success"})
}

// listLimits is GET /limits: every limit of every pool, read from Redis
// (force_update is accepted and changes nothing: there is no stale copy).
func (s *handlers) listLimits(w http.ResponseWriter, r *http.Request) {
	all, err := s.Limits.All(r.Context(), s.PoolNames)
	if err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	respond.WriteJSON(w, http.StatusOK, all)
}
