package rmqotel

import (
	"fmt"
	"log/slog"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/rmq-go/rmq/rmq"
)

// ScopeName is the instrumentation scope of the tracer and meter.
const ScopeName = "github.com/rmq-go/rmq/x/otel"

// Telemetry traces and measures the clients it is attached to. Attach it
// with rmq.WithObserver, rmq.WithSendHook(tel.SendHook) and
// rmq.WithMiddleware(tel.Middleware); see the package documentation.
type Telemetry struct {
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
	newTraces  bool
	log        *slog.Logger

	inst  instruments
	depth *depthReader

	// open holds the process span of each delivery between Delivered and
	// Finished, keyed by the *consumer.Message the consumer passes to both
	// and to the listener.
	open sync.Map // *consumer.Message -> *openSpan
	// attrs caches the metric attributes of each topic, by name.
	attrs sync.Map // string -> metric.MeasurementOption
}

var (
	_ rmq.Observer       = (*Telemetry)(nil)
	_ rmq.TopicObserver  = (*Telemetry)(nil)
	_ rmq.ExpiryObserver = (*Telemetry)(nil)
	_ rmq.FlowObserver   = (*Telemetry)(nil)
)

type config struct {
	tp         trace.TracerProvider
	mp         metric.MeterProvider
	propagator propagation.TextMapPropagator
	newTraces  bool
	logger     *slog.Logger
}

// Option configures New.
type Option func(*config)

// WithTracerProvider sets the tracer provider (default: the global one,
// otel.GetTracerProvider()).
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithMeterProvider sets the meter provider (default: the global one,
// otel.GetMeterProvider()).
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// WithPropagator sets how trace context is written to and read from message
// headers (default: W3C trace context, propagation.TraceContext{}; pass
// otel.GetTextMapPropagator() to follow the global setting, baggage
// included).
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.propagator = p }
}

// WithNewTraces makes each process span the root of a trace of its own,
// linked to the send span, instead of its child (see the package
// documentation).
func WithNewTraces() Option { return func(c *config) { c.newTraces = true } }

// WithLogger sets where failed queue depth reads are logged (default
// slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// New returns a Telemetry with its instruments created on the meter
// provider. A nil propagator or logger is refused with rmq.ErrInvalidOption.
func New(opts ...Option) (*Telemetry, error) {
	cfg := config{propagator: propagation.TraceContext{}, logger: slog.Default()}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	if cfg.propagator == nil {
		return nil, fmt.Errorf("%w: rmqotel: nil propagator", rmq.ErrInvalidOption)
	}
	if cfg.logger == nil {
		return nil, fmt.Errorf("%w: rmqotel: nil logger", rmq.ErrInvalidOption)
	}
	t := &Telemetry{
		tracer:     cfg.tp.Tracer(ScopeName),
		propagator: cfg.propagator,
		newTraces:  cfg.newTraces,
		log:        cfg.logger,
	}
	meter := cfg.mp.Meter(ScopeName)
	if err := t.inst.init(meter); err != nil {
		return nil, err
	}
	d, err := newDepthReader(meter, cfg.logger)
	if err != nil {
		return nil, err
	}
	t.depth = d
	return t, nil
}

// WatchQueues adds the queues under the inspector's key prefix to the depth
// gauges, read from Redis at collection time. A prefix watched already is
// read once; a topic name defined under several prefixes is reported for
// the first one watched.
func (t *Telemetry) WatchQueues(i *rmq.Inspector) { t.depth.add(i) }
