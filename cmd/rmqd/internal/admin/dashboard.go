package admin

import (
	"bytes"
	"html/template"
	"net/http"
	pathpkg "path"
	"sort"
	"strings"

	"github.com/rmq-go/rmq/cmd/dashboard"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
)

// mountDashboard serves the library's dashboard of the default pool at
// cfg.Dashboard on the admin mux, and rmqd's own token page beside it
// (PATH without its slash, plus "-tokens"), both behind the admin accounts
// when there are any. The token page looks like one of the dashboard's
// (its stylesheet and header), and the dashboard's navigation links to it.
func (s *handlers) mountDashboard(mux *http.ServeMux) {
	path := s.Cfg.Dashboard
	if path == "" {
		return
	}
	def := s.Pools[names.DefaultPool]
	base := strings.TrimSuffix(path, "/")
	tokens := base + "-tokens"
	opts := []dashboard.Option{
		dashboard.WithKeyPrefix(s.Cfg.Prefix),
		dashboard.WithCounters(s.Counters),
		dashboard.WithLogger(s.Log),
		// Relative, as the dashboard's own links, so that a proxy may
		// serve it all under another path.
		dashboard.WithNavLink("Tokens", "../"+pathpkg.Base(tokens)),
	}
	if len(def.Forwards) > 0 {
		opts = append(opts, dashboard.WithForwards(s.dashboardForwards))
	}
	if len(s.Cfg.Accounts) > 0 {
		opts = append(opts, dashboard.WithAuth(s.RequireAccount))
	}
	mux.Handle(path, http.StripPrefix(base, dashboard.New(def.Rdb, opts...)))
	mux.Handle("GET "+tokens, s.RequireAccount(http.HandlerFunc(s.tokenPage)))
}

// tokenPageTmpl has the dashboard's header and uses its stylesheet (a
// relative link from PATH-tokens to PATH/assets/style.css).
var tokenPageTmpl = template.Must(template.New("tokens").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Tokens · RMQ dashboard</title>
<link rel="stylesheet" href="{{.Dashboard}}assets/style.css">
</head>
<body>
<header class="top">
  <a class="brand" href="{{.Dashboard}}">RMQ</a>
  <nav><a href="{{.Dashboard}}">Overview</a> <a href="{{.Self}}" aria-current="page">Tokens</a></nav>
</header>
<main>
<h1>Namespaces and tokens</h1>
<p class="note">Tokens are shown by their first characters only. The admin API on this port makes and deletes them:
<code>POST /token/NAMESPACE?description=…</code>, <code>DELETE /token/NAMESPACE/TOKEN</code>.</p>
<table class="grid" id="tokens">
<thead><tr><th>pool</th><th>namespace</th><th>token</th><th>description</th></tr></thead>
<tbody>
{{range .Rows}}<tr><td>{{.Pool}}</td><td>{{.Namespace}}</td><td class="mid">{{.Token}}</td><td>{{.Description}}</td></tr>
{{else}}<tr><td class="empty" colspan="4">No tokens yet.</td></tr>
{{end}}</tbody></table>
</main>
<footer>{{len .Rows}} tokens</footer>
</body>
</html>
`))

type tokenRow struct{ Pool, Namespace, Token, Description string }

// maskToken shows the first four characters of a token only: enough to
// tell tokens apart, not enough to use one.
func maskToken(t string) string {
	if len(t) <= 4 {
		return "…"
	}
	return t[:4] + "…"
}

// tokenPage lists every namespace that has tokens, with masked tokens.
func (s *handlers) tokenPage(w http.ResponseWriter, r *http.Request) {
	entries, err := s.Tokens.Namespaces(r.Context())
	if err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	var rows []tokenRow
	for _, e := range entries {
		pool, ns, _ := strings.Cut(e, "/")
		toks, err := s.Tokens.List(r.Context(), pool, ns)
		if err != nil {
			s.WriteInternal(w, r, err)
			return
		}
		for t, d := range toks {
			rows = append(rows, tokenRow{pool, ns, maskToken(t), d})
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		return a.Pool+"/"+a.Namespace+"/"+a.Description+a.Token < b.Pool+"/"+b.Namespace+"/"+b.Description+b.Token
	})
	var buf bytes.Buffer
	if err := tokenPageTmpl.Execute(&buf, struct {
		Dashboard, Self string
		Rows            []tokenRow
	}{s.Cfg.Dashboard, pathpkg.Base(r.URL.Path), rows}); err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// The dashboard's stylesheet and nothing else; never in a frame.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; frame-ancestors 'none'; form-action 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	_, _ = w.Write(buf.Bytes())
}
