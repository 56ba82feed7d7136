package admin

import (
	"net/http"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/service"
)

// handlers are the service's routes this package serves: methods of
// their own over the service's state.
type handlers struct{ *service.Service }

// Handler serves tokens, limits and the operational routes over svc.
func Handler(svc *service.Service) http.Handler { return (&handlers{svc}).handler() }
