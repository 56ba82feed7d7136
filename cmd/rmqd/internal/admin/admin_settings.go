package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"
)

// queueSetting is one of the settings stored with a queue (its limits,
// its lifecycle) as the admin port serves it: S the library's value, J its
// JSON.
type queueSetting[S, J any] struct {
	what     string // "limits", "lifecycle": the 400's text
	read     func(*rmq.Inspector, context.Context, topic.Topic) (S, error)
	write    func(*rmq.Inspector, context.Context, topic.Topic, S) error
	invalid  error // the library's error for values out of bounds
	toJSON   func(S) J
	fromJSON func(J) (S, bool) // false: refused before the library sees it
}

// serve reads (GET), replaces (PUT) or clears (DELETE: the zero S) the
// setting of the request's queue. A body that does not parse, or values
// out of bounds, answer 400 and change nothing; a queue never published
// to answers 404.
func (qs queueSetting[S, J]) serve(s *handlers, w http.ResponseWriter, r *http.Request) {
	p, t, found, ok := s.adminQueueTopic(w, r)
	if !ok {
		return
	}
	if !found {
		respond.WriteError(w, http.StatusNotFound, "queue not found")
		return
	}
	switch r.Method {
	case http.MethodPut:
		var j J
		raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBody))
		if err == nil {
			err = json.Unmarshal(raw, &j)
		}
		v, valid := qs.fromJSON(j)
		if err != nil || !valid {
			respond.WriteError(w, http.StatusBadRequest, "invalid "+qs.what)
			return
		}
		if err := qs.write(p.Insp, r.Context(), t, v); err != nil {
			if errors.Is(err, qs.invalid) {
				respond.WriteError(w, http.StatusBadRequest, err.Error())
				return
			}
			s.LibError(w, r, err)
			return
		}
	case http.MethodDelete:
		var zero S
		if err := qs.write(p.Insp, r.Context(), t, zero); err != nil {
			s.LibError(w, r, err)
			return
		}
		respond.WriteNoContent(w)
		return
	}
	v, err := qs.read(p.Insp, r.Context(), t)
	if err != nil {
		s.LibError(w, r, err)
		return
	}
	respond.WriteJSON(w, http.StatusOK, qs.toJSON(v))
}
