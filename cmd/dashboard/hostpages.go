package dashboard

import (
	"fmt"
	"html/template"
	"net/http"
	"regexp"
	"slices"
)

// hostPage is a page of the host's served by the dashboard (WithPage).
type hostPage struct {
	label, path string
	content     func(*http.Request) (template.HTML, error)
}

// WithPage adds a page of the host's to the dashboard: served at path
// below the dashboard's root ("tokens": /rmq/tokens for a dashboard at
// /rmq/), inside the dashboard's own layout, navigation and WithAuth, and
// linked as label from the navigation of every page, its own included.
// content returns the page's main part, HTML the host made safe (an
// html/template's output); an error it returns is shown as the
// dashboard's error page (500). rmqd's token page is one.
//
// path is one or more letters, digits and dashes, not one of the
// dashboard's own pages; another is a configuration error, shown by every
// page.
func WithPage(label, path string, content func(*http.Request) (template.HTML, error)) Option {
	return func(c *config) { c.pages = append(c.pages, hostPage{label, path, content}) }
}

var hostPagePath = regexp.MustCompile(`^[A-Za-z0-9-]+$`)

// ownPages are the dashboard's page paths a host page may not take.
var ownPages = []string{"topic", "message", "search", "schedules", "events", "finished", "settings",
	"workers", "api", "assets", "action", "zookeeper"}

// checkPages reports a host page whose path is not a page name, or is
// taken.
func (c *config) checkPages() error {
	seen := map[string]bool{}
	for _, p := range c.pages {
		if !hostPagePath.MatchString(p.path) || slices.Contains(ownPages, p.path) || seen[p.path] {
			return fmt.Errorf("dashboard: page path %q: taken, or not letters, digits and dashes", p.path)
		}
		seen[p.path] = true
	}
	return nil
}

// routePages serves the host's pages: each is rendered in the layout like
// the dashboard's own.
func (h *handler) routePages(m *http.ServeMux) {
	if h.cfg.checkPages() != nil {
		return // initErr says why, on every page
	}
	for _, p := range h.cfg.pages {
		pattern := "GET /" + p.path
		m.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if h.initErr != nil {
				h.failErr(w, r, h.initErr)
				return
			}
			body, err := p.content(r)
			if err != nil {
				h.failErr(w, r, err)
				return
			}
			h.render(w, r, http.StatusOK, "host", p.label, body)
		})
	}
}
