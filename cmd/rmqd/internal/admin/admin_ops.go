package admin

import (
	"encoding/json"
	"net/http"
	"runtime/debug"
	"strings"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/service"
)

func (s *handlers) version(w http.ResponseWriter, r *http.Request) {
	respond.WritePretty(w, http.StatusOK, s.Cfg.Version)
}

func (s *handlers) listPools(w http.ResponseWriter, r *http.Request) {
	respond.WritePretty(w, http.StatusOK, s.PoolNames)
}

// info is GET /info[?pool=]: namespace -> queues of one pool, from the
// topic definitions in its Redis. Served as text/plain like lmstfy; an
// unknown pool answers 200 with an empty body.
func (s *handlers) info(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("pool")
	if name == "" {
		name = names.DefaultPool
	}
	p, ok := s.Pools[name]
	if !ok {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		return
	}
	qs, err := p.Queues(r.Context())
	if err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	body, _ := json.Marshal(qs)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(body)
}

func (s *handlers) serveMetrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	if err := s.Metrics.Write(w); err != nil {
		s.Log.WarnContext(r.Context(), "rmqd: write metrics", "err", err)
	}
}

type accessLogBody struct {
	Status string `json:"status"`
}

func (s *handlers) accessLogStatus() accessLogBody {
	if s.AccessLog.Load() {
		return accessLogBody{"enabled"}
	}
	return accessLogBody{"disabled"}
}

func (s *handlers) getAccessLog(w http.ResponseWriter, r *http.Request) {
	respond.WriteJSON(w, http.StatusOK, s.accessLogStatus())
}

// setAccessLog is POST /accesslog?status=enable|disable; it changes this
// process only.
func (s *handlers) setAccessLog(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Query().Get("status") {
	case "enable":
		s.AccessLog.Store(true)
	case "disable":
		s.AccessLog.Store(false)
	default:
		respond.WriteError(w, http.StatusBadRequest, "invalid status")
		return
	}
	respond.WriteJSON(w, http.StatusOK, s.accessLogStatus())
}

// buildVersion is set with -ldflags "-X main.buildVersion=…"; without it
// the module version (or "devel") is reported.
var buildVersion = ""

// ReadVersion reports the version and the VCS stamp Go embedded.
func ReadVersion() service.VersionInfo {
	v := service.VersionInfo{Version: buildVersion}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		if v.Version == "" {
			v.Version = strings.TrimPrefix(bi.Main.Version, "v")
		}
		for _, st := range bi.Settings {
			switch st.Key {
			case "vcs.revision":
				v.BuildCommit = st.Value
			case "vcs.time":
				v.BuildDate = st.Value
			}
		}
	}
	if v.Version == "" || v.Version == "(devel)" {
		v.Version = "devel"
	}
	return v
}
