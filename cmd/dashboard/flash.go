package dashboard

import (
	"crypto/hmac"
	"net/http"
	"net/url"
)

// flashSigField carries the signature of a flash message. A page shows
// ?flash= only when it comes with the dashboard's own signature (an HMAC
// under the CSRF key): the message after an action is the dashboard's,
// and a link made elsewhere cannot put its own text on a dashboard page.
const flashSigField = "flash_sig"

// flashQuery is the query that carries text to the next page.
func (h *handler) flashQuery(text string) string {
	return url.Values{"flash": {text}, flashSigField: {h.sign("flash\x00" + text)}}.Encode()
}

// flashOf is the flash message of r: its ?flash= if signed, else "".
func (h *handler) flashOf(r *http.Request) string {
	q := r.URL.Query()
	text := q.Get("flash")
	if text == "" || !hmac.Equal([]byte(q.Get(flashSigField)), []byte(h.sign("flash\x00"+text))) {
		return ""
	}
	return text
}
