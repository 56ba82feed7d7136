package forward

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/redact"
)

// Spec is one --forward [POOL:]NAMESPACE/QUEUE=URL, checked: the
// queue's jobs go to the broker of URL when they come due (forward.go).
type Spec struct {
	Pool, Ns, Queue string
	Kind            string // "nats", "amqp" or "kafka"
	Raw             string // the URL as given: it may hold a password

	// Dial is what the broker client connects to: the NATS server URL, the
	// AMQP URL without rmqd's parameters; brokers are Kafka's seeds.
	Dial    string
	Brokers []string
	// Subject (NATS) or topic (Kafka); exchange and routingKey (AMQP).
	Subject, Exchange, RoutingKey string
}

// Name is how rmqd names the forward in messages: "ns/q", or "pool:ns/q"
// outside the default pool.
func (f Spec) Name() string {
	if f.Pool == names.DefaultPool {
		return f.Ns + "/" + f.Queue
	}
	return f.Pool + ":" + f.Ns + "/" + f.Queue
}

// Target is the URL without its password, as routes and logs show it.
func (f Spec) Target() string { return redact.Redact(f.Raw) }

// Flags collects --forward. A bad value is reported by parseConfig
// (err), without the URL's password.
type Flags struct {
	List []Spec
	Err  error
}

func (f *Flags) String() string {
	parts := make([]string, len(f.List))
	for i, s := range f.List {
		parts[i] = s.Name() + "=" + s.Target()
	}
	return strings.Join(parts, " ")
}

func (f *Flags) Set(v string) error {
	if err := f.add(v); err != nil && f.Err == nil {
		f.Err = fmt.Errorf("--forward: %w", err)
	}
	return nil
}

// SetAll adds each of the space-separated forwards of an environment
// variable (rmqd's flag parsing looks for this method on a flag's value).
func (f *Flags) SetAll(v string) error {
	for _, s := range strings.Fields(v) {
		if err := f.add(s); err != nil {
			return err
		}
	}
	return nil
}

func (f *Flags) add(v string) error {
	spec, err := ParseForward(v)
	if err != nil {
		return err
	}
	for _, s := range f.List {
		if s.Pool == spec.Pool && s.Ns == spec.Ns && s.Queue == spec.Queue {
			return fmt.Errorf("%s: forwarded twice (a queue goes to one broker)", spec.Name())
		}
	}
	f.List = append(f.List, spec)
	return nil
}

// errForwardSyntax is the shape every --forward takes.
var errForwardSyntax = errors.New("want [POOL:]NAMESPACE/QUEUE=URL with a nats://, amqp://, amqps:// or kafka:// URL")

// ParseForward reads [POOL:]NAMESPACE/QUEUE=URL. Its errors never quote
// the URL, which may hold a password.
func ParseForward(v string) (Spec, error) {
	left, raw, ok := strings.Cut(v, "=")
	if !ok || raw == "" {
		return Spec{}, errForwardSyntax
	}
	s := Spec{Pool: names.DefaultPool, Raw: raw}
	if p, rest, ok := strings.Cut(left, ":"); ok {
		if !names.ValidName(p) {
			return s, fmt.Errorf("pool name %q: want [-_A-Za-z0-9]+", p)
		}
		s.Pool, left = p, rest
	}
	ns, q, ok := strings.Cut(left, "/")
	if !ok {
		return s, errForwardSyntax
	}
	if msg := names.NameErr(ns, q); msg != "" {
		return s, fmt.Errorf("%q: %s", left, msg)
	}
	s.Ns, s.Queue = ns, q
	scheme, _, _ := strings.Cut(raw, "://")
	var err error
	switch strings.ToLower(scheme) {
	case "nats":
		s.Kind = "nats"
		err = s.parseNATS()
	case "amqp", "amqps":
		s.Kind = "amqp"
		err = s.parseAMQP()
	case "kafka":
		s.Kind = "kafka"
		err = s.parseKafka()
	default:
		return s, fmt.Errorf("%s: %w", s.Name(), errForwardSyntax)
	}
	if err != nil {
		return s, fmt.Errorf("%s: %w", s.Name(), err)
	}
	return s, nil
}

// parseURL is url.Parse with an error that does not quote the URL.
func parseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("invalid URL: %v", err)
	}
	if u.Hostname() == "" {
		return nil, errors.New("invalid URL: no host")
	}
	if u.Port() == "" {
		return nil, errors.New("invalid URL: no port")
	}
	return u, nil
}

// parseNATS reads nats://[user:pass@]host:port/SUBJECT.
func (s *Spec) parseNATS() error {
	u, err := parseURL(s.Raw)
	if err != nil {
		return err
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return errors.New("a nats:// URL takes no query: nats://[user:pass@]host:port/SUBJECT")
	}
	s.Subject = strings.TrimPrefix(u.Path, "/")
	if err := checkSubject(s.Subject); err != nil {
		return err
	}
	s.Dial = (&url.URL{Scheme: "nats", User: u.User, Host: u.Host}).String()
	return nil
}

// checkSubject accepts a NATS subject a message can be published to:
// dot-separated non-empty tokens, no wildcard, no white space.
func checkSubject(subj string) error {
	if subj == "" {
		return errors.New("no subject: nats://host:port/SUBJECT")
	}
	for _, tok := range strings.Split(subj, ".") {
		switch {
		case tok == "":
			return fmt.Errorf("subject %q has an empty token", subj)
		case tok == "*" || tok == ">":
			return fmt.Errorf("subject %q has a wildcard: a message is published to one subject", subj)
		case strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f }):
			return fmt.Errorf("subject %q has white space or a control character", subj)
		}
	}
	return nil
}

// maxAMQPName is AMQP's limit on an exchange name and a routing key
// (a short string).
const maxAMQPName = 255

// parseAMQP reads amqp://user:pass@host:port/vhost?exchange=E&routing_key=K.
// Both parameters are rmqd's and are taken off the URL the client dials;
// other parameters (heartbeat, connection_timeout ...) stay for it.
func (s *Spec) parseAMQP() error {
	u, err := parseURL(s.Raw)
	if err != nil {
		return err
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return errors.New("invalid URL: bad query")
	}
	s.Exchange, s.RoutingKey = q.Get("exchange"), q.Get("routing_key")
	if q.Has("routing_key") && s.RoutingKey == "" {
		return errors.New("routing_key is empty (leave it out for the queue's name)")
	}
	if s.RoutingKey == "" {
		s.RoutingKey = s.Queue
	}
	if len(s.Exchange) > maxAMQPName || len(s.RoutingKey) > maxAMQPName {
		return errors.New("exchange or routing_key longer than 255 bytes")
	}
	q.Del("exchange")
	q.Del("routing_key")
	u.RawQuery = q.Encode()
	s.Dial = u.String()
	return nil
}

// parseKafka reads kafka://host:port[,host:port...]/TOPIC.
func (s *Spec) parseKafka() error {
	rest := s.Raw[len("kafka://"):]
	hosts, topic, ok := strings.Cut(rest, "/")
	if !ok {
		return errors.New("no topic: kafka://host:port[,host:port]/TOPIC")
	}
	if strings.Contains(hosts, "@") {
		return errors.New("kafka:// URLs take no credentials (SASL is not supported)")
	}
	if strings.ContainsAny(topic, "?#") {
		return errors.New("a kafka:// URL takes no query")
	}
	for _, h := range strings.Split(hosts, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil || host == "" {
			return fmt.Errorf("broker %q: want host:port", h)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("broker %q: bad port", h)
		}
		s.Brokers = append(s.Brokers, h)
	}
	if err := checkKafkaTopicName(topic); err != nil {
		return err
	}
	s.Subject = topic
	return nil
}

// checkKafkaTopicName applies Kafka's topic name rule: [a-zA-Z0-9._-]{1,249},
// not "." or "..".
func checkKafkaTopicName(t string) error {
	if t == "" || t == "." || t == ".." || len(t) > 249 {
		return fmt.Errorf("topic %q: want [a-zA-Z0-9._-]{1,249}", t)
	}
	for i := 0; i < len(t); i++ {
		if c := t[i]; !names.NameByte(c) && c != '.' {
			return fmt.Errorf("topic %q: want [a-zA-Z0-9._-]{1,249}", t)
		}
	}
	return nil
}
