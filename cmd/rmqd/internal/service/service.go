package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sort"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/cmd/dashboard"
	"github.com/rmq-go/rmq/rmq"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/forward"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/metrics"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/redact"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"
)

// serviceConfig is what the service needs besides its Redis clients.
type ServiceConfig struct {
	// Prefix is the key prefix of the queues (the library's) and of rmqd's
	// own keys ("<prefix>:rmqd:…").
	Prefix string
	// CacheTTL bounds how long a token or limit change made through another
	// process may take to be seen here.
	CacheTTL time.Duration
	// MaxWait caps a consume's timeout (a long poll), so no request is held
	// longer than the server's write timeout allows.
	MaxWait time.Duration
	// PullIdle is how long a queue nobody consumes keeps its pull engine
	// (0: defaultPullIdle).
	PullIdle time.Duration
	// Accounts are the admin's basic-auth users (user -> password); none
	// leaves the admin port open, as in lmstfy.
	Accounts map[string]string
	// AccessLog starts with the access log on (POST /accesslog toggles it).
	AccessLog bool
	// AccessLogger writes the access log's lines (nil: the service's log).
	AccessLogger *slog.Logger
	Version      VersionInfo
	// Dashboard is where the admin listener serves the web dashboard of
	// the default pool ("/dashboard/"); empty: no dashboard.
	Dashboard string
	// Pprof serves Go's profiles at /debug/pprof/, behind the accounts.
	Pprof bool
	// AdminHosts are the host names the admin listener answers besides IP
	// addresses and localhost ("*": any); see adminguard.go.
	AdminHosts []string
	// MaxAuthFailures is how many failed logins, and requests with an
	// invalid token, a client address may make per minute (each kind);
	// 0: unlimited. See guard.go.
	MaxAuthFailures int
	// TrustedProxies are the proxies whose X-Forwarded-For names the
	// client address.
	TrustedProxies []netip.Prefix
	// Secrets are the passwords rmqd was given, never to be shown.
	Secrets []string
	// Forwards send queues' jobs to brokers when due (forward.go).
	Forwards []forward.ForwardSpec
	// Quotas bound what one tenant may hold or keep busy (quotas.go);
	// the zero value bounds nothing.
	Quotas Quotas
}

type VersionInfo struct {
	Version     string `json:"version"`
	BuildCommit string `json:"build_commit"`
	BuildDate   string `json:"build_date"`
}

// service is rmqd: both listeners' handlers over the pools. It keeps no
// state a second process would need: tokens, limits and queues are in
// Redis; what it caches is bounded by cfg.CacheTTL.
type Service struct {
	cfg       ServiceConfig
	log       *slog.Logger
	Pools     map[string]*Pool
	PoolNames []string // sorted
	tokens    *tokenStore
	limits    *limitStore
	throttle  *throttler
	metrics   *metrics.Metrics
	guard     *authGuard
	watch     *tokenWatch
	redact    *redact.Redactor
	pollCaps  *pollCaps   // long polls per token and process (pollcap.go)
	bodies    *bodyBudget // bulk bodies in progress (bulkbody.go)
	// adminHosts are the Host names the admin listener answers.
	adminHosts hostPolicy
	accessLog  atomic.Bool
	counters   *dashboard.Counters // the default pool's, for the dashboard's charts

	// stopping is cancelled when shutdown begins, ending long polls early
	// so that http.Server.Shutdown does not wait for them.
	stopping context.Context
	stop     context.CancelFunc
}

// newService starts an RMQ client per pool; clients must contain "default".
func NewService(ctx context.Context, cfg ServiceConfig, clients map[string]redis.UniversalClient, log *slog.Logger) (*Service, error) {
	def, ok := clients[names.DefaultPool]
	if !ok {
		return nil, errors.New("rmqd: no default pool")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "rmq"
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	s := &Service{
		cfg:      cfg,
		log:      log,
		Pools:    map[string]*Pool{},
		tokens:   newTokenStore(def, cfg.Prefix, cfg.CacheTTL),
		limits:   newLimitStore(def, cfg.Prefix, cfg.CacheTTL),
		throttle: NewThrottler(def, cfg.Prefix),
		metrics:  metrics.NewMetrics(),
		// rmqd only pulls: lateness is what consume reports (firings).
		counters: dashboard.NewCounters(dashboard.LatenessFromFired()),
		guard:    NewAuthGuard(def, cfg.Prefix, cfg.MaxAuthFailures, cfg.TrustedProxies, log),
		redact:   redact.NewRedactor(cfg.Secrets),
		pollCaps: newPollCaps(cfg.Quotas),
		bodies:   newBodyBudget(cfg.Quotas.MaxBulkMemory),

		adminHosts: NewHostPolicy(cfg.AdminHosts),
	}
	s.watch = newTokenWatch(s.tokens, watchInterval, log)
	s.tokens.removed = func(ref TokenRef) {
		s.watch.revoked(ref)
		s.guard.forgetToken(ref)
	}
	if s.cfg.AccessLogger == nil {
		s.cfg.AccessLogger = log
	}
	s.stopping, s.stop = context.WithCancel(context.Background())
	s.accessLog.Store(cfg.AccessLog)
	for name, rdb := range clients {
		var extra []rmq.Option
		if name == names.DefaultPool {
			extra = append(extra, rmq.WithObserver(s.counters))
		}
		var fws []forward.ForwardSpec
		for _, f := range cfg.Forwards {
			if f.Pool == name {
				fws = append(fws, f)
			}
		}
		p, err := newPool(ctx, name, rdb, cfg.Prefix, cfg.PullIdle, log, fws, s.redact.String, extra...)
		if err != nil {
			_ = s.Close(ctx)
			return nil, err
		}
		s.Pools[name] = p
		s.PoolNames = append(s.PoolNames, name)
	}
	sort.Strings(s.PoolNames)
	return s, nil
}

// defaultMaxWait is the longest long poll when none is configured.
const DefaultMaxWait = 10 * time.Minute

// watchInterval is how often the tokens of open long polls are checked
// for a deletion made through another process.
const watchInterval = time.Second

// beginShutdown ends the long polls in progress; new requests still work.
func (s *Service) BeginShutdown() { s.stop() }

// close stops the RMQ clients and the token watch (no goroutine of the
// service is left).
func (s *Service) Close(ctx context.Context) error {
	s.stop()
	s.watch.close()
	var errs []error
	for name, p := range s.Pools {
		if err := p.close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("pool %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// apiHandler serves lmstfy's queue API (LMSTFY-API.md §4–6).
func (s *Service) ApiHandler() http.Handler {
	rt := &apiRouter{}
	q := func(pattern string, o routeOpts, h queueHandler) { rt.handle(pattern, s.queueRoute(o, h)) }
	q("PUT /api/{ns}/{q}", routeOpts{throttle: throttleWrite}, s.publish)
	q("PUT /api/{ns}/{q}/bulk", routeOpts{throttle: throttleWrite}, s.publishBulk)
	q("PUT /api/{ns}/{q}/job/{id}", routeOpts{throttle: throttleWrite}, s.republish) // a publish too
	q("GET /api/{ns}/{q}", routeOpts{consume: true, throttle: throttleRead}, s.refuseForwarded(s.consume))
	q("DELETE /api/{ns}/{q}/job/{id}", routeOpts{}, s.ackJob)
	q("POST /api/{ns}/{q}/job/{id}/nack", routeOpts{}, s.nackJob)
	q("GET /api/{ns}/{q}/peek", routeOpts{}, s.peekQueue)
	q("GET /api/{ns}/{q}/job/{id}", routeOpts{}, s.peekJob)
	q("GET /api/{ns}/{q}/size", routeOpts{public: true}, s.size)
	q("DELETE /api/{ns}/{q}", routeOpts{}, s.destroy)
	q("GET /api/{ns}/{q}/deadletter", routeOpts{}, s.deadPeek)
	q("GET /api/{ns}/{q}/deadletter/size", routeOpts{public: true}, s.deadSize)
	q("PUT /api/{ns}/{q}/deadletter", routeOpts{}, s.respawn)
	q("DELETE /api/{ns}/{q}/deadletter", routeOpts{}, s.deadDelete)
	s.scheduleRoutes(q) // api_schedules.go
	return s.serveAPI(rt, func(w http.ResponseWriter, r *http.Request) {
		respond.WriteError(w, http.StatusNotFound, "api not found")
	})
}

// adminHandler serves tokens, limits and the operational routes (§8).
func (s *Service) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	auth := s.basicAuth
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
	mux.Handle("GET /queue/{ns}/{q}/limits", auth(s.queueLimitsRoute))
	mux.Handle("PUT /queue/{ns}/{q}/limits", auth(s.queueLimitsRoute))
	mux.Handle("DELETE /queue/{ns}/{q}/limits", auth(s.queueLimitsRoute))
	mux.HandleFunc("GET /version", s.version)
	mux.HandleFunc("GET /pools", s.listPools)
	if s.cfg.Quotas.PrivateInfo {
		mux.Handle("GET /info", auth(s.info))
	} else {
		mux.HandleFunc("GET /info", s.info) // as lmstfy: open
	}
	mux.HandleFunc("GET /metrics", s.serveMetrics)
	mux.HandleFunc("GET /accesslog", s.getAccessLog)
	mux.Handle("POST /accesslog", auth(s.setAccessLog))
	s.registerPprof(mux)
	s.mountDashboard(mux)
	return s.serve("admin", mux, http.NotFound)
}
