package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/forward"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/redact"
)

func noEnv(string) string { return "" }

func TestParseForward(t *testing.T) {
	for _, c := range []struct {
		in   string
		want forward.Spec
	}{
		{"shop/orders=nats://127.0.0.1:4222/orders.due", forward.Spec{Pool: names.DefaultPool, Ns: "shop", Queue: "orders", Kind: "nats",
			Dial: "nats://127.0.0.1:4222", Subject: "orders.due"}},
		{"shop/orders=nats://u:p%40ss@h:4222/a.b-c_d", forward.Spec{Pool: names.DefaultPool, Ns: "shop", Queue: "orders", Kind: "nats",
			Dial: "nats://u:p%40ss@h:4222", Subject: "a.b-c_d"}},
		{"eu:shop/orders=amqp://guest:secret@h:5672/prod?exchange=jobs&routing_key=due&heartbeat=5", forward.Spec{Pool: "eu", Ns: "shop", Queue: "orders",
			Kind: "amqp", Dial: "amqp://guest:secret@h:5672/prod?heartbeat=5", Exchange: "jobs", RoutingKey: "due"}},
		// Routing key: the queue's name; exchange: the default one.
		{"shop/orders=amqps://guest:secret@h:5671/", forward.Spec{Pool: names.DefaultPool, Ns: "shop", Queue: "orders", Kind: "amqp",
			Dial: "amqps://guest:secret@h:5671/", RoutingKey: "orders"}},
		{"shop/orders=kafka://h1:9092,h2:9093/orders.due", forward.Spec{Pool: names.DefaultPool, Ns: "shop", Queue: "orders", Kind: "kafka",
			Brokers: []string{"h1:9092", "h2:9093"}, Subject: "orders.due"}},
	} {
		got, err := forward.ParseForward(c.in)
		require.NoError(t, err, c.in)
		_, raw, _ := strings.Cut(c.in, "=")
		c.want.Raw = raw
		require.Equal(t, c.want, got, c.in)
	}
}

// A bad --forward is refused with exit status 2 and a message that names
// what is wrong, never the URL's password.
func TestParseForwardErrors(t *testing.T) {
	for in, want := range map[string]string{
		"shop/orders":                                     "want [POOL:]NAMESPACE/QUEUE=URL",
		"shop/orders=":                                    "want [POOL:]NAMESPACE/QUEUE=URL",
		"orders=nats://h:1/s":                             "want [POOL:]NAMESPACE/QUEUE=URL",
		"sh op/orders=nats://h:1/s":                       "namespace name contains forbidden characters",
		"shop/_orders=nats://h:1/s":                       "queue name contains forbidden characters",
		"b@d:shop/orders=nats://h:1/s":                    `pool name "b@d"`,
		"shop/orders=redis://u:hunter22@h:1/s":            "shop/orders: want [POOL:]NAMESPACE/QUEUE=URL",
		"shop/orders=nats://u:hunter22@h:1/":              "no subject",
		"shop/orders=nats://u:hunter22@h:1/a.*":           "wildcard",
		"shop/orders=nats://u:hunter22@h:1/a.>":           "wildcard",
		"shop/orders=nats://u:hunter22@h:1/a..b":          "empty token",
		"shop/orders=nats://u:hunter22@h:1/a%20b":         "white space",
		"shop/orders=nats://u:hunter22@h/a":               "no port",
		"shop/orders=nats://u:hunter22@h:x/a":             "invalid URL",
		"shop/orders=nats://u:hunter22@h:1/a?x=1":         "takes no query",
		"shop/orders=amqp://u:hunter22@:1/":               "no host",
		"shop/orders=amqp://u:hunter22@h:1/?routing_key=": "routing_key is empty",
		"shop/orders=kafka://u:hunter22@h:1/t":            "take no credentials",
		"shop/orders=kafka://h:1":                         "no topic",
		"shop/orders=kafka://h:1/":                        "topic \"\"",
		"shop/orders=kafka://h:1/a/b":                     "topic \"a/b\"",
		"shop/orders=kafka://h:1,h2/t":                    `broker "h2": want host:port`,
		"shop/orders=kafka://h:0/t":                       `broker "h:0": bad port`,
	} {
		_, err := forward.ParseForward(in)
		require.ErrorContains(t, err, want, in)
		require.NotContains(t, err.Error(), "hunter22", in)
	}
	long := strings.Repeat("k", 256)
	_, err := forward.ParseForward("shop/orders=amqp://h:1/?routing_key=" + long)
	require.ErrorContains(t, err, "longer than 255 bytes")
}

func TestForwardFlags(t *testing.T) {
	var out bytes.Buffer
	c, err := parseConfig([]string{"--pool", "eu=redis://h:2", "--forward", "shop/a=nats://u:natspw@h:1/s",
		"--forward", "eu:shop/a=kafka://h:1/t"}, func(k string) string {
		if k == "RMQD_FORWARD" {
			return "shop/b=amqp://u:amqppw@h:1/ shop/c=kafka://h:1/t"
		}
		return ""
	}, &out)
	require.NoError(t, err)
	var names []string
	for _, f := range c.forwards.List {
		names = append(names, f.Name()+"="+f.Target())
	}
	// The variable's come first: they are the defaults the command line adds to.
	require.Equal(t, []string{"shop/b=amqp://u:***@h:1/", "shop/c=kafka://h:1/t", "shop/a=nats://u:***@h:1/s", "eu:shop/a=kafka://h:1/t"}, names)
	require.Subset(t, c.secrets(), []string{"natspw", "amqppw"})

	for _, args := range [][]string{
		{"--forward", "shop/a=nats://u:natspw@h:1/s", "--forward", "shop/a=kafka://h:1/t"},
		{"--forward", "eu:shop/a=nats://u:natspw@h:1/s"},
		{"--forward", "shop/a=nats://u:natspw@h:1/"},
	} {
		_, err := parseConfig(args, noEnv, &out)
		require.Error(t, err, args)
		require.NotContains(t, err.Error(), "natspw")
	}
	_, err = parseConfig([]string{"--forward", "shop/a=nats://h:1/s", "--forward", "shop/a=kafka://h:1/t"}, noEnv, &out)
	require.ErrorContains(t, err, "shop/a: forwarded twice")
	_, err = parseConfig([]string{"--forward", "eu:shop/a=nats://h:1/s"}, noEnv, &out)
	require.ErrorContains(t, err, `no pool "eu"`)
	_, err = parseConfig(nil, func(k string) string {
		if k == "RMQD_FORWARD" {
			return "shop/b=amqp://u:amqppw@h:1/?routing_key="
		}
		return ""
	}, &out)
	require.ErrorContains(t, err, "RMQD_FORWARD: shop/b: routing_key is empty")
	require.NotContains(t, err.Error(), "amqppw")
	require.NotContains(t, out.String(), "natspw")
	require.NotContains(t, out.String(), "amqppw")
}

func TestRedactArgsForward(t *testing.T) {
	got := redact.Args([]string{"rmqd", "--forward", "shop/a=amqp://u:pw1@h:1/?exchange=x", "-forward=eu:shop/b=nats://u:pw2@h:1/s",
		"--forward", "shop/c=kafka://h:1/t"})
	require.Equal(t, []string{"rmqd", "--forward", "shop/a=amqp://u:***@h:1/?exchange=x", "-forward=eu:shop/b=nats://u:***@h:1/s",
		"--forward", "shop/c=kafka://h:1/t"}, got)
}
