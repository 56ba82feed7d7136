package main

import (
	"encoding/json"
	"net/http"
	"runtime/debug"
	"strings"
)

func (s *service) version(w http.ResponseWriter, r *http.Request) {
	writePretty(w, http.StatusOK, s.cfg.Version)
}

func (s *service) listPools(w http.ResponseWriter, r *http.Request) {
	writePretty(w, http.StatusOK, s.poolNames)
}

// info is GET /info[?pool=]: namespace -> queues of one pool, from the
// topic definitions in its Redis. Served as text/plain like lmstfy; an
// unknown pool answers 200 with an empty body.
func (s *service) info(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("pool")
	if name == "" {
		name = defaultPool
	}
	p, ok := s.pools[name]
	if !ok {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		return
	}
	qs, err := p.queues(r.Context())
	if err != nil {
		s.writeInternal(w, r, err)
		return
	}
	body, _ := json.Marshal(qs)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(body)
}

func (s *service) serveMetrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	if err := s.metrics.write(w); err != nil {
		s.log.WarnContext(r.Context(), "rmqd: write metrics", "err", err)
	}
}

type accessLogBody struct {
	Status string `json:"status"`
}

func (s *service) accessLogStatus() accessLogBody {
	if s.accessLog.Load() {
		return accessLogBody{"enabled"}
	}
	return accessLogBody{"disabled"}
}

func (s *service) getAccessLog(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.accessLogStatus())
}

// setAccessLog is POST /accesslog?status=enable|disable; it changes this
// process only.
func (s *service) setAccessLog(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Query().Get("status") {
	case "enable":
		s.accessLog.Store(true)
	case "disable":
		s.accessLog.Store(false)
	default:
		writeError(w, http.StatusBadRequest, "invalid status")
		return
	}
	writeJSON(w, http.StatusOK, s.accessLogStatus())
}

// buildVersion is set with -ldflags "-X main.buildVersion=…"; without it
// the module version (or "devel") is reported.
var buildVersion = ""

// readVersion reports the version and the VCS stamp Go embedded.
func readVersion() versionInfo {
	v := versionInfo{Version: buildVersion}
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
