package api

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/params"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/service"
)

// deadBatch bounds the ids one dead-letter step reads and moves.
const deadBatch = 500

// deadPeek shows the dead letter's size and its head (the first to die).
func (s *handlers) deadPeek(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	t, found, err := qr.Pool.QueueTopic(r.Context(), qr.Ns, qr.Q)
	if err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	var (
		n    int64
		head string
	)
	if found {
		if n, err = qr.Pool.DeadSize(r.Context(), t); err != nil {
			s.WriteInternal(w, r, err)
			return
		}
		ids, err := qr.Pool.DeadOldest(r.Context(), t, 1)
		if err != nil {
			s.WriteInternal(w, r, err)
			return
		}
		if len(ids) > 0 {
			head = ids[0]
		}
	}
	respond.WriteJSON(w, http.StatusOK, struct {
		Namespace string `json:"namespace"`
		Queue     string `json:"queue"`
		Size      int64  `json:"deadletter_size"`
		Head      string `json:"deadletter_head"`
	}{qr.Ns, qr.Q, n, head})
}

// deadSize counts the dead letter; no token needed.
func (s *handlers) deadSize(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	t, found, err := qr.Pool.QueueTopic(r.Context(), qr.Ns, qr.Q)
	if err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	var n int64
	if found {
		if n, err = qr.Pool.DeadSize(r.Context(), t); err != nil {
			s.WriteInternal(w, r, err)
			return
		}
	}
	respond.WriteJSON(w, http.StatusOK, SizeBody{qr.Ns, qr.Q, n})
}

// deadLimit reads ?limit= (≥ 1, default 1).
func deadLimit(r *http.Request) (int64, bool) {
	n, ok := queryInt(r.URL.Query(), "limit", 1)
	return n, ok && n >= 1
}

// queryInt reads a signed decimal parameter as lmstfy's dead-letter routes
// do (strconv.ParseInt: a leading sign is allowed, any int64); an absent
// parameter gives def, an empty or malformed one is invalid.
func queryInt(q url.Values, name string, def int64) (int64, bool) {
	vals, present := q[name]
	if !present {
		return def, true
	}
	v, err := strconv.ParseInt(vals[0], 10, 64)
	return v, err == nil
}

// maxRespawnTTL is the longest ttl a respawn gives (the library's bound,
// about 100 years); lmstfy takes any int64 and so does rmqd, cutting it.
const maxRespawnTTL = 100 * 365 * 24 * time.Hour

// respawn moves up to limit dead jobs, oldest death first, back to the
// ready queue.
func (s *handlers) respawn(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	limit, ok := deadLimit(r)
	if !ok {
		respond.WriteError(w, http.StatusBadRequest, "invalid limit")
		return
	}
	ttl, ok := queryInt(r.URL.Query(), "ttl", params.DefaultTTL)
	if !ok || ttl < 0 {
		respond.WriteError(w, http.StatusBadRequest, "invalid ttl")
		return
	}
	renewTTL := maxRespawnTTL
	if ttl < int64(maxRespawnTTL/time.Second) {
		renewTTL = time.Duration(ttl) * time.Second
	}
	t, found, err := qr.Pool.QueueTopic(r.Context(), qr.Ns, qr.Q)
	if err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	var total int64
	for found && total < limit {
		ids, err := qr.Pool.DeadOldest(r.Context(), t, int(min(limit-total, deadBatch)))
		if err != nil {
			s.WriteInternal(w, r, err)
			return
		}
		if len(ids) == 0 {
			break
		}
		n, err := qr.Pool.Respawn(r.Context(), t, ids, renewTTL)
		if err != nil {
			s.LibError(w, r, err)
			return
		}
		total += int64(n)
		if n == 0 {
			break
		}
	}
	respond.WriteJSON(w, http.StatusOK, struct {
		Msg   string `json:"msg"`
		Count int64  `json:"count"`
	}{"respawned", total})
}

// deadDelete deletes up to limit dead jobs, oldest death first, with their
// data.
func (s *handlers) deadDelete(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	limit, ok := deadLimit(r)
	if !ok {
		respond.WriteError(w, http.StatusBadRequest, "invalid limit")
		return
	}
	t, found, err := qr.Pool.QueueTopic(r.Context(), qr.Ns, qr.Q)
	if err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	var done int64
	for found && done < limit {
		ids, err := qr.Pool.DeadOldest(r.Context(), t, int(min(limit-done, deadBatch)))
		if err != nil {
			s.WriteInternal(w, r, err)
			return
		}
		if len(ids) == 0 {
			break
		}
		n, err := qr.Pool.Insp.DeleteDead(r.Context(), t, ids...)
		if err != nil {
			s.WriteInternal(w, r, err)
			return
		}
		done += int64(n)
		if n == 0 {
			break
		}
	}
	respond.WriteNoContent(w)
}
