package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/cmd/dashboard"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/forward"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/metrics"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/redact"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/auth"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/pull"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/quota"
)

// Config is what the service needs besides its Redis clients.
type Config struct {
	// Prefix is the key prefix of the queues (the library's) and of rmqd's
	// own keys ("<prefix>:rmqd:…").
	Prefix string
	// CacheTTL bounds how long a token or limit change made through another
	// process may take to be seen here.
	CacheTTL time.Duration
	// MaxWait caps a consume's timeout (a long poll), so no request is held
	// longer than the server's write timeout allows.
	MaxWait time.Duration
	// EventPing is how often an event stream with nothing to say sends a
	// comment, so that proxies keep it open (0: DefaultEventPing).
	EventPing time.Duration
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
	// 0: unlimited. See ../auth/guard.go.
	MaxAuthFailures int
	// TrustedProxies are the proxies whose X-Forwarded-For names the
	// client address.
	TrustedProxies []netip.Prefix
	// Secrets are the passwords rmqd was given, never to be shown.
	Secrets []string
	// Forwards send queues' jobs to brokers when due (../forward/forward.go).
	Forwards []forward.Spec
	// Quotas bound what one tenant may hold or keep busy (../quota/quotas.go);
	// the zero value bounds nothing.
	Quotas quota.Quotas
}

type VersionInfo struct {
	Version     string `json:"version"`
	BuildCommit string `json:"build_commit"`
	BuildDate   string `json:"build_date"`
}

// Service is rmqd: both listeners' handlers over the pools. It keeps no
// state a second process would need: tokens, limits and queues are in
// Redis; what it caches is bounded by cfg.CacheTTL.
type Service struct {
	Cfg       Config
	Log       *slog.Logger
	Pools     map[string]*pull.Pool
	PoolNames []string // sorted
	Tokens    *auth.TokenStore
	Limits    *auth.LimitStore
	throttle  *auth.Throttler
	Metrics   *metrics.Metrics
	guard     *auth.Guard
	watch     *auth.TokenWatch
	redact    *redact.Redactor
	PollCaps  *auth.PollCaps // long polls per token and process (../auth/pollcap.go)
	Bodies    *bodyBudget    // bulk bodies in progress (bulkbody.go)
	// adminHosts are the Host names the admin listener answers.
	adminHosts hostPolicy
	AccessLog  atomic.Bool
	Counters   *dashboard.Counters // the default pool's, for the dashboard's charts

	// Stopping is cancelled when shutdown begins, ending long polls early
	// so that http.Server.Shutdown does not wait for them.
	Stopping context.Context
	stop     context.CancelFunc
}

// New starts an RMQ client per pool; clients must contain "default".
func New(ctx context.Context, cfg Config, clients map[string]redis.UniversalClient, log *slog.Logger) (*Service, error) {
	def, ok := clients[names.DefaultPool]
	if !ok {
		return nil, errors.New("rmqd: no default pool")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "rmq"
	}
	if cfg.EventPing <= 0 {
		cfg.EventPing = DefaultEventPing
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	s := &Service{
		Cfg:      cfg,
		Log:      log,
		Pools:    map[string]*pull.Pool{},
		Tokens:   auth.NewTokenStore(def, cfg.Prefix, cfg.CacheTTL),
		Limits:   auth.NewLimitStore(def, cfg.Prefix, cfg.CacheTTL),
		throttle: auth.NewThrottler(def, cfg.Prefix),
		Metrics:  metrics.New(),
		// rmqd only pulls: lateness is what consume reports (firings).
		Counters: dashboard.NewCounters(dashboard.LatenessFromFired()),
		guard:    auth.NewGuard(def, cfg.Prefix, cfg.MaxAuthFailures, cfg.TrustedProxies, log),
		redact:   redact.New(cfg.Secrets),
		PollCaps: auth.NewPollCaps(cfg.Quotas),
		Bodies:   newBodyBudget(cfg.Quotas.MaxBulkMemory),

		adminHosts: NewHostPolicy(cfg.AdminHosts),
	}
	s.watch = auth.NewTokenWatch(s.Tokens, watchInterval, log)
	s.Tokens.Removed = func(ref auth.TokenRef) {
		s.watch.Revoked(ref)
		s.guard.ForgetToken(ref)
	}
	if s.Cfg.AccessLogger == nil {
		s.Cfg.AccessLogger = log
	}
	s.Stopping, s.stop = context.WithCancel(context.Background())
	s.AccessLog.Store(cfg.AccessLog)
	for name, rdb := range clients {
		var extra []rmq.Option
		if name == names.DefaultPool {
			extra = append(extra, rmq.WithObserver(s.Counters))
		}
		var fws []forward.Spec
		for _, f := range cfg.Forwards {
			if f.Pool == name {
				fws = append(fws, f)
			}
		}
		p, err := pull.NewPool(ctx, name, rdb, cfg.Prefix, cfg.PullIdle, log, fws, s.redact.String, extra...)
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

// DefaultEventPing is how often an idle event stream says it is alive.
const DefaultEventPing = 15 * time.Second

// DefaultMaxWait is the longest long poll when none is configured.
const DefaultMaxWait = 10 * time.Minute

// watchInterval is how often the tokens of open long polls are checked
// for a deletion made through another process.
const watchInterval = time.Second

// BeginShutdown ends the long polls in progress; new requests still work.
func (s *Service) BeginShutdown() { s.stop() }

// Close stops the RMQ clients and the token watch (no goroutine of the
// service is left).
func (s *Service) Close(ctx context.Context) error {
	s.stop()
	s.watch.Close()
	var errs []error
	for name, p := range s.Pools {
		if err := p.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("pool %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// LibError answers an error of the library or the engine.
func (s *Service) LibError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, pull.ErrTypeConflict), errors.Is(err, topic.ErrConflict), errors.Is(err, producer.ErrTypeMismatch):
		respond.WriteError(w, http.StatusConflict, "queue has another type")
	case errors.Is(err, producer.ErrInvalidPriority), errors.Is(err, producer.ErrInvalidTime),
		errors.Is(err, producer.ErrInvalidRange), errors.Is(err, producer.ErrInvalidKey):
		respond.WriteError(w, http.StatusBadRequest, strings.TrimPrefix(err.Error(), "rmq: "))
	case errors.Is(err, producer.ErrDuplicate):
		// A unique publish (unique_for) whose id came within the window.
		respond.WriteError(w, http.StatusConflict, "duplicate job: published within unique_for")
	default:
		s.WriteInternal(w, r, err)
	}
}
