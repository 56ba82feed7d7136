package dashboard

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/rmq"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Option configures the dashboard.
type Option func(*config)

type config struct {
	keyPrefix  string
	pathPrefix string
	readOnly   bool
	auth       func(http.Handler) http.Handler
	logger     *slog.Logger
	csrfKey    []byte
	pageSize   int
	counters   *Counters
	zk         *zkConfig
	navLinks   []NavLink
	forwards   func(context.Context) []Forward
	pages      []hostPage // WithPage
}

// NavLink is a link of the header's navigation.
type NavLink struct {
	Label string
	// Href is relative to the dashboard's root (every page is one level
	// below it: "../tokens" from a dashboard at /rmq/ is /tokens), or
	// absolute.
	Href string
}

// WithKeyPrefix sets the Redis key prefix of the topics shown (default
// "rmq", as rmq.WithPrefix).
func WithKeyPrefix(prefix string) Option { return func(c *config) { c.keyPrefix = prefix } }

// WithPathPrefix names the URL path the dashboard is mounted at, e.g.
// "/dashboard". It is needed only when the host passes requests on with
// their full path; behind http.StripPrefix it may be left out, since every
// link the dashboard writes is relative. It also scopes the CSRF cookie.
func WithPathPrefix(prefix string) Option {
	return func(c *config) { c.pathPrefix = strings.TrimRight(prefix, "/") }
}

// WithReadOnly hides every action and refuses every request that would
// change something (403).
func WithReadOnly() Option { return func(c *config) { c.readOnly = true } }

// WithAuth wraps the whole dashboard, assets included, in the host's
// authentication: mw receives the dashboard and returns the handler that
// is served, so it may refuse a request (401, 403, a redirect to a login
// page) or pass it on.
func WithAuth(mw func(http.Handler) http.Handler) Option { return func(c *config) { c.auth = mw } }

// WithLogger sets the logger of actions taken and errors met (default
// slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithCSRFKey sets the key CSRF tokens are signed with. By default each
// handler draws a random key, which is right for one process; replicas
// behind a load balancer must share a key of at least 32 bytes.
func WithCSRFKey(key []byte) Option { return func(c *config) { c.csrfKey = key } }

// WithCounters adds the charts of sent, acked, retried and dead messages per
// second and the firing-lateness histogram, drawn from c, which must be
// attached to the host's rmq.Client (rmq.WithObserver(c)).
func WithCounters(c *Counters) Option { return func(cfg *config) { cfg.counters = c } }

// WithNavLink adds a link to the navigation of every page, after the
// dashboard's own: a page of the host's (rmqd's token page) reached from
// the dashboard. The host's page may use the dashboard's stylesheet,
// assets/style.css under the dashboard's root, and the same header markup
// to look like one of its pages.
func WithNavLink(label, href string) Option {
	return func(c *config) { c.navLinks = append(c.navLinks, NavLink{label, href}) }
}

// defaultPageSize is how many entries a listing page shows.
const defaultPageSize = 50

// handler is the dashboard. It starts no goroutine of its own: every page
// reads Redis when it is asked for, the live charts are drawn by the
// browser from periodic JSON snapshots, and the readers of an event feed's
// stream belong to its request and end with it.
type handler struct {
	cfg  config
	rdb  redis.UniversalClient
	insp *rmq.Inspector
	// client follows event logs (rmq.Client.Events) for the event feed;
	// never started, it holds no goroutine of its own.
	client *rmq.Client
	log    *slog.Logger
	pages  map[string]*template.Template
	mux    *http.ServeMux
	// initErr is a configuration error shown by every page.
	initErr error
}

// New returns the dashboard of the topics on rdb (a *redis.Client or
// *redis.ClusterClient) as an http.Handler to mount in the host's server.
//
// It takes the Redis client rather than an *rmq.Inspector because the
// overview shows Redis itself (version, memory, maxmemory-policy), which
// the Inspector does not expose. A configuration error (a bad key prefix,
// a nil client, a short CSRF key, a relative ZooKeeper root) is shown by
// every page with status 500.
func New(rdb redis.UniversalClient, opts ...Option) http.Handler {
	cfg := config{keyPrefix: "rmq", logger: slog.Default(), pageSize: defaultPageSize}
	for _, o := range opts {
		o(&cfg)
	}
	h := &handler{cfg: cfg, rdb: rdb, log: cfg.logger}
	if h.log == nil {
		h.log = slog.Default()
	}
	switch {
	case rdb == nil:
		h.initErr = errors.New("dashboard: nil Redis client")
	case cfg.csrfKey != nil && len(cfg.csrfKey) < 32:
		h.initErr = errors.New("dashboard: CSRF key shorter than 32 bytes")
	}
	if err := cfg.checkPages(); err != nil && h.initErr == nil {
		h.initErr = err
	}
	for _, p := range cfg.pages {
		h.cfg.navLinks = append(h.cfg.navLinks, NavLink{p.label, p.path})
	}
	if err := h.initZooKeeper(); err != nil && h.initErr == nil {
		h.initErr = err
	}
	if cfg.csrfKey == nil {
		h.cfg.csrfKey = make([]byte, 32)
		_, _ = rand.Read(h.cfg.csrfKey) // never fails (crypto/rand)
	}
	if rdb != nil {
		h.insp = rmq.NewInspector(rdb, rmq.WithPrefix(cfg.keyPrefix))
		c, err := rmq.New(rdb, rmq.WithPrefix(cfg.keyPrefix), rmq.WithLogger(h.log))
		if err != nil && h.initErr == nil {
			h.initErr = err
		}
		h.client = c
	}
	h.pages = parsePages()
	h.routes()
	var out http.Handler = h
	if cfg.auth != nil {
		out = cfg.auth(out)
	}
	return out
}

func parsePages() map[string]*template.Template {
	pages := map[string]*template.Template{}
	for _, name := range []string{"overview", "topic", "message", "confirm", "error", "zookeeper", "schedules", "events", "finished", "settings", "host", "workers"} {
		pages[name] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS,
			"templates/layout.html", "templates/history.html", "templates/"+name+".html"))
	}
	return pages
}

func (h *handler) routes() {
	assets, _ := fs.Sub(assetFS, "assets")
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", h.overview)
	m.HandleFunc("GET /topic", h.topicPage)
	m.HandleFunc("GET /message", h.messagePage)
	m.HandleFunc("GET /search", h.search)
	m.HandleFunc("GET /schedules", h.schedulesPage)
	m.HandleFunc("GET /events", h.eventsPage)
	m.HandleFunc("GET /events/stream", h.eventStream)
	m.HandleFunc("GET /finished", h.finishedPage)
	m.HandleFunc("GET /settings", h.settingsPage)
	m.HandleFunc("GET /api/overview", h.apiOverview)
	m.HandleFunc("GET /api/history", h.apiHistoryHandler)
	m.HandleFunc("GET /workers", h.workersPage)
	if h.cfg.zk != nil {
		m.HandleFunc("GET /zookeeper", h.zookeeperPage)
	}
	m.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(assets)))
	m.HandleFunc("POST /action", h.action)
	h.routePages(m)
	h.mux = m
}

// ServeHTTP strips the path prefix (when the host did not), sets the
// headers every response carries, and routes.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	// Scripts and styles come from the dashboard only: a message body that
	// slipped past escaping still could not run.
	hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "same-origin")
	p := r.URL.Path
	if h.cfg.pathPrefix != "" && strings.HasPrefix(p, h.cfg.pathPrefix) {
		p = strings.TrimPrefix(p, h.cfg.pathPrefix)
	}
	if p == "" {
		// Mounted without a trailing slash: relative links need one. The
		// request line still holds the path the browser asked for.
		orig, _, _ := strings.Cut(r.RequestURI, "?")
		if !strings.HasPrefix(orig, "/") {
			orig = h.cfg.pathPrefix
		}
		hd.Set("Location", orig+"/")
		w.WriteHeader(http.StatusMovedPermanently)
		return
	}
	if p != r.URL.Path {
		r2 := r.Clone(r.Context())
		r2.URL.Path = p
		r2.URL.RawPath = ""
		r = r2
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if !h.checkUnsafe(w, r) {
			return
		}
	}
	h.mux.ServeHTTP(w, r)
}
