package main

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/redact"
)

// A NATS URL whose credential is a token (nats://TOKEN@host) was shown in
// clear: GET /forwards, the dashboard's Forwards panel, pprof's command
// line and every log line of the forward. One redaction now hides every
// URL credential form everywhere.
func TestBinaryForwardTokenURLRedacted(t *testing.T) {
	srv, _ := natsWithStreamFW(t)

	const secret = "s3cr3tNatsTok99"
	rsrv := redistest.Shared(t)
	p := startRmqd(t, "redis://"+rsrv.Addr()+"/0", []string{"RMQD_PREFIX=" + redistest.Prefix(t)},
		"--admin-account", "admin:"+adminPw, "--pprof", "--log-level", "debug",
		"--forward", "shop/orders=nats://"+secret+"@"+srv.Addr()+"/fw.orders")
	want := "nats://***@" + srv.Addr() + "/fw.orders"

	a := do(t, "GET", p.admin+"/forwards", "", adminHdr)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	require.Contains(t, string(a.body), want)
	a = do(t, "GET", p.admin+"/dashboard/", "", adminHdr)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	require.Contains(t, string(a.body), want, "the Forwards panel")
	a = do(t, "GET", p.admin+"/debug/pprof/cmdline", "", adminHdr)
	require.Equal(t, http.StatusOK, a.status, "%s", a)
	require.Contains(t, string(a.body), want)

	// The broker goes away: the forward's failure is logged (WARN).
	tok := newTokenOn(t, p.admin, "shop", adminHdr)
	require.NoError(t, srv.Kill())
	require.Equal(t, http.StatusCreated, do(t, "PUT", p.api+"/api/shop/orders?tries=1", "x", "X-Token: "+tok).status)
	p.out.waitFor(t, "level=WARN", p.done)
	require.Equal(t, 0, p.stop(t))
	out := p.out.String()
	require.Contains(t, out, "target="+want)
	for _, body := range []string{out, string(a.body)} {
		require.NotContains(t, body, secret)
	}
}

// Every credential form of a URL, alone or quoted in a message, is hidden
// by redact, and found by urlSecrets for the log redactor.
func TestRedactEveryURLForm(t *testing.T) {
	for in, want := range map[string]string{
		"redis://u:secret@h:1/0":                                           "redis://u:***@h:1/0",
		"redis://:secret@h:1/0":                                            "redis://:***@h:1/0",
		"redis://h:1/0":                                                    "redis://h:1/0",
		"nats://s3cr3tTok@h:4222/a.b":                                      "nats://***@h:4222/a.b",
		"amqp://u:p@h:5672/v?exchange=e&password=hunter2":                  "amqp://u:***@h:5672/v?exchange=e&password=***",
		"nats://h:1/s?token=abcd&routing_key=k#f":                          "nats://h:1/s?token=***&routing_key=k#f",
		"dial nats://tok1234@h:1: refused, retry amqp://h/?auth_token=zz9": "dial nats://***@h:1: refused, retry amqp://h/?auth_token=***",
		"no url here":                                                      "no url here",
	} {
		require.Equal(t, want, redact.Redact(in), in)
	}
	require.ElementsMatch(t, []string{"s3cr3tTok", "hunter2", "p", "ab cd", "ab+cd"},
		redact.URLSecrets("nats://s3cr3tTok@h:1/s amqp://u:p@h/?password=hunter2&token=ab+cd"))
}
