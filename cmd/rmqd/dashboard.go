package main

import (
	"html/template"
	"net/http"
	"sort"
	"strings"

	"github.com/rmq-go/rmq/cmd/dashboard"
)

// mountDashboard serves the library's dashboard of the default pool at
// cfg.Dashboard on the admin mux, and rmqd's own token page beside it
// (PATH without its slash, plus "-tokens"), both behind the admin accounts
// when there are any.
func (s *service) mountDashboard(mux *http.ServeMux) {
	path := s.cfg.Dashboard
	if path == "" {
		return
	}
	def := s.pools[defaultPool]
	opts := []dashboard.Option{
		dashboard.WithKeyPrefix(s.cfg.Prefix),
		dashboard.WithCounters(s.counters),
		dashboard.WithLogger(s.log),
	}
	if len(s.cfg.Accounts) > 0 {
		opts = append(opts, dashboard.WithAuth(s.requireAccount))
	}
	base := strings.TrimSuffix(path, "/")
	mux.Handle(path, http.StripPrefix(base, dashboard.New(def.rdb, opts...)))
	mux.Handle("GET "+base+"-tokens", s.requireAccount(http.HandlerFunc(s.tokenPage)))
}

var tokenPageTmpl = template.Must(template.New("tokens").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>rmqd: namespaces and tokens</title></head>
<body><h1>Namespaces and tokens</h1>
<p><a href="{{.Dashboard}}">Queues (dashboard)</a></p>
{{if not .Rows}}<p>No tokens yet: <code>POST /token/NAMESPACE?description=…</code> on this port makes one.</p>{{else}}
<table><thead><tr><th>pool</th><th>namespace</th><th>token</th><th>description</th></tr></thead><tbody>
{{range .Rows}}<tr><td>{{.Pool}}</td><td>{{.Namespace}}</td><td><code>{{.Token}}</code></td><td>{{.Description}}</td></tr>
{{end}}</tbody></table>{{end}}
</body></html>
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
func (s *service) tokenPage(w http.ResponseWriter, r *http.Request) {
	entries, err := s.tokens.namespaces(r.Context())
	if err != nil {
		s.writeInternal(w, r, err)
		return
	}
	var rows []tokenRow
	for _, e := range entries {
		pool, ns, _ := strings.Cut(e, "/")
		toks, err := s.tokens.list(r.Context(), pool, ns)
		if err != nil {
			s.writeInternal(w, r, err)
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
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'")
	_ = tokenPageTmpl.Execute(w, struct {
		Dashboard string
		Rows      []tokenRow
	}{s.cfg.Dashboard, rows})
}
