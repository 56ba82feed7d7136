package admin

import "net/http"

// handler serves tokens, limits and the operational routes (§8).
func (s *handlers) handler() http.Handler {
	mux := http.NewServeMux()
	auth := s.BasicAuth
	mux.Handle("POST /token/{ns}", auth(s.createToken))
	mux.Handle("GET /token/{ns}", auth(s.listTokens))
	mux.Handle("DELETE /token/{ns}/{token}", auth(s.deleteToken))
	mux.Handle("GET /token/{ns}/{token}/limit", auth(s.getLimit))
	mux.Handle("POST /token/{ns}/{token}/limit", auth(s.createLimit))
	mux.Handle("PUT /token/{ns}/{token}/limit", auth(s.putLimit))
	mux.Handle("DELETE /token/{ns}/{token}/limit", auth(s.deleteLimit))
	mux.Handle("GET /limits", auth(s.listLimits))
	mux.Handle("GET /queue/{ns}/{q}", auth(s.queueInfo))
	mux.Handle("POST /queue/{ns}/{q}/pause", auth(s.pauseQueue))
	mux.Handle("POST /queue/{ns}/{q}/resume", auth(s.resumeQueue))
	mux.Handle("GET /forwards", auth(s.listForwards))
	mux.Handle("GET /workers", auth(s.listWorkers))
	mux.Handle("GET /queue/{ns}/{q}/limits", auth(s.queueLimitsRoute))
	mux.Handle("PUT /queue/{ns}/{q}/limits", auth(s.queueLimitsRoute))
	mux.Handle("DELETE /queue/{ns}/{q}/limits", auth(s.queueLimitsRoute))
	mux.Handle("GET /queue/{ns}/{q}/lifecycle", auth(s.queueLifecycleRoute))
	mux.Handle("PUT /queue/{ns}/{q}/lifecycle", auth(s.queueLifecycleRoute))
	mux.Handle("DELETE /queue/{ns}/{q}/lifecycle", auth(s.queueLifecycleRoute))
	mux.HandleFunc("GET /version", s.version)
	mux.HandleFunc("GET /pools", s.listPools)
	if s.Cfg.Quotas.PrivateInfo {
		mux.Handle("GET /info", auth(s.info))
	} else {
		mux.HandleFunc("GET /info", s.info) // as lmstfy: open
	}
	mux.HandleFunc("GET /metrics", s.serveMetrics)
	mux.HandleFunc("GET /accesslog", s.getAccessLog)
	mux.Handle("POST /accesslog", auth(s.setAccessLog))
	s.RegisterPprof(mux)
	s.mountDashboard(mux)
	return s.Serve("admin", mux, http.NotFound)
}
