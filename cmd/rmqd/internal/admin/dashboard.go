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
// cfg.Dashboard on the admin mux, with rmqd's token page as one of its
// pages (PATH/tokens: the dashboard's layout, navigation and auth), both
// behind the admin accounts when there are any. The token page's older
// address, PATH without its slash plus "-tokens", leads to it.
func (s *handlers) mountDashboard(mux *http.ServeMux) {
	path := s.Cfg.Dashboard
	if path == "" {
		return
	}
	def := s.Pools[names.DefaultPool]
	base := strings.TrimSuffix(path, "/")
	opts := []dashboard.Option{
		dashboard.WithKeyPrefix(s.Cfg.Prefix),
		dashboard.WithCounters(s.Counters),
		dashboard.WithLogger(s.Log),
		dashboard.WithPage("Tokens", "tokens", s.tokenPage),
	}
	if len(def.Forwards) > 0 {
		opts = append(opts, dashboard.WithForwards(s.dashboardForwards))
	}
	if len(s.Cfg.Accounts) > 0 {
		opts = append(opts, dashboard.WithAuth(s.RequireAccount))
	}
	mux.Handle(path, http.StripPrefix(base, dashboard.New(def.Rdb, opts...)))
	// Relative, as the dashboard's own links, so that a proxy may serve it
	// all under another path.
	moved := pathpkg.Base(base) + "/tokens"
	mux.Handle("GET "+base+"-tokens", s.RequireAccount(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Location", moved)
		w.WriteHeader(http.StatusMovedPermanently)
	})))
}

// tokenPageTmpl is the main part of the token page; the dashboard adds its
// header, navigation and stylesheet.
var tokenPageTmpl = template.Must(template.New("tokens").Parse(`<h1>Namespaces and tokens</h1>
<p class="note">Tokens are shown by their first characters only. The admin API on this port makes and deletes them:
<code>POST /token/NAMESPACE?description=…</code>, <code>DELETE /token/NAMESPACE/TOKEN</code>.</p>
<table class="grid" id="tokens">
<thead><tr><th>pool</th><th>namespace</th><th>token</th><th>description</th></tr></thead>
<tbody>
{{range .}}<tr><td>{{.Pool}}</td><td>{{.Namespace}}</td><td class="mid">{{.Token}}</td><td>{{.Description}}</td></tr>
{{else}}<tr><td class="empty" colspan="4">No tokens yet.</td></tr>
{{end}}</tbody></table>
<p class="note">{{len .}} tokens</p>
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

// tokenPage lists every namespace that has tokens, with masked tokens:
// the main part of the dashboard's token page.
func (s *handlers) tokenPage(r *http.Request) (template.HTML, error) {
	entries, err := s.Tokens.Namespaces(r.Context())
	if err != nil {
		return "", err
	}
	var rows []tokenRow
	for _, e := range entries {
		pool, ns, _ := strings.Cut(e, "/")
		toks, err := s.Tokens.List(r.Context(), pool, ns)
		if err != nil {
			return "", err
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
	if err := tokenPageTmpl.Execute(&buf, rows); err != nil {
		return "", err
	}
	return template.HTML(buf.String()), nil //nolint:gosec // html/template's output
}
