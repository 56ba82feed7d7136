package main

import (
	"net/http"
	"time"
)

// deadBatch bounds the ids one dead-letter step reads and moves.
const deadBatch = 500

// deadPeek shows the dead letter's size and its head (the first to die).
func (s *service) deadPeek(w http.ResponseWriter, r *http.Request, qr *queueReq) {
	t, found, err := qr.pool.queueTopic(r.Context(), qr.ns, qr.q)
	if err != nil {
		s.writeInternal(w, r, err)
		return
	}
	var (
		n    int64
		head string
	)
	if found {
		if n, err = qr.pool.deadSize(r.Context(), t); err != nil {
			s.writeInternal(w, r, err)
			return
		}
		ids, err := qr.pool.deadOldest(r.Context(), t, 1)
		if err != nil {
			s.writeInternal(w, r, err)
			return
		}
		if len(ids) > 0 {
			head = ids[0]
		}
	}
	writeJSON(w, http.StatusOK, struct {
		Namespace string `json:"namespace"`
		Queue     string `json:"queue"`
		Size      int64  `json:"deadletter_size"`
		Head      string `json:"deadletter_head"`
	}{qr.ns, qr.q, n, head})
}

// deadSize counts the dead letter; no token needed.
func (s *service) deadSize(w http.ResponseWriter, r *http.Request, qr *queueReq) {
	t, found, err := qr.pool.queueTopic(r.Context(), qr.ns, qr.q)
	if err != nil {
		s.writeInternal(w, r, err)
		return
	}
	var n int64
	if found {
		if n, err = qr.pool.deadSize(r.Context(), t); err != nil {
			s.writeInternal(w, r, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, sizeBody{qr.ns, qr.q, n})
}

// deadLimit reads ?limit= (≥ 1, default 1).
func deadLimit(r *http.Request) (int, bool) {
	n, ok := queryUint(r.URL.Query(), "limit", 1, maxUint32)
	return int(n), ok && n >= 1
}

// respawn moves up to limit dead jobs, oldest death first, back to the
// ready queue.
func (s *service) respawn(w http.ResponseWriter, r *http.Request, qr *queueReq) {
	limit, ok := deadLimit(r)
	if !ok {
		writeError(w, http.StatusBadRequest, "invalid limit")
		return
	}
	ttl, ok := queryUint(r.URL.Query(), "ttl", defaultTTL, maxUint32)
	if !ok {
		writeError(w, http.StatusBadRequest, "invalid ttl")
		return
	}
	t, found, err := qr.pool.queueTopic(r.Context(), qr.ns, qr.q)
	if err != nil {
		s.writeInternal(w, r, err)
		return
	}
	total := 0
	for found && total < limit {
		ids, err := qr.pool.deadOldest(r.Context(), t, min(limit-total, deadBatch))
		if err != nil {
			s.writeInternal(w, r, err)
			return
		}
		if len(ids) == 0 {
			break
		}
		n, err := qr.pool.respawn(r.Context(), t, ids, time.Duration(ttl)*time.Second)
		if err != nil {
			s.libError(w, r, err)
			return
		}
		total += n
		if n == 0 {
			break
		}
	}
	writeJSON(w, http.StatusOK, struct {
		Msg   string `json:"msg"`
		Count int    `json:"count"`
	}{"respawned", total})
}

// deadDelete deletes up to limit dead jobs, oldest death first, with their
// data.
func (s *service) deadDelete(w http.ResponseWriter, r *http.Request, qr *queueReq) {
	limit, ok := deadLimit(r)
	if !ok {
		writeError(w, http.StatusBadRequest, "invalid limit")
		return
	}
	t, found, err := qr.pool.queueTopic(r.Context(), qr.ns, qr.q)
	if err != nil {
		s.writeInternal(w, r, err)
		return
	}
	done := 0
	for found && done < limit {
		ids, err := qr.pool.deadOldest(r.Context(), t, min(limit-done, deadBatch))
		if err != nil {
			s.writeInternal(w, r, err)
			return
		}
		if len(ids) == 0 {
			break
		}
		n, err := qr.pool.insp.DeleteDead(r.Context(), t, ids...)
		if err != nil {
			s.writeInternal(w, r, err)
			return
		}
		done += n
		if n == 0 {
			break
		}
	}
	writeNoContent(w)
}
