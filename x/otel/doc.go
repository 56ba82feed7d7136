// Package rmqotel instruments RMQ for Go clients with OpenTelemetry: a span
// per send that carries W3C trace context to the consumer in the message's
// headers, a span per delivery with its outcome, and metrics equivalent to
// those of the Prometheus module (x/prometheus). It is a module of its own
// (github.com/rmq-go/rmq/x/otel), so a program that does not use it neither
// downloads nor links OpenTelemetry.
//
// Wiring (one Telemetry serves any number of clients):
//
//	tel, err := rmqotel.New() // global tracer and meter providers; WithTracerProvider etc. to choose
//	if err != nil { ... }
//	client, err := rmq.New(rdb,
//		rmq.WithObserver(tel),              // metrics, and each delivery's outcome on its span
//		rmq.WithSendHook(tel.SendHook),     // a "send" span per message; trace context into its headers
//		rmq.WithMiddleware(tel.Middleware), // a "process" span per delivery
//	)
//	if err != nil { ... }
//	tel.WatchQueues(client.Inspector()) // queue depth gauges
//
// # Spans
//
// Span names, kinds and attributes follow the OpenTelemetry semantic
// conventions for messaging (messaging-spans.md): "send <topic>" is a
// PRODUCER span whose context is the message's creation context, injected
// into the headers ("traceparent", "tracestate") unless the sender put a
// creation context there already, which is then left alone and linked.
// "process <topic>" is a CONSUMER span around the listener: the conventions
// say a process span SHOULD link to the message's creation context, and it
// does; it is also its child by default, so one trace runs from the send to
// the handler and whatever the handler calls. WithNewTraces makes every
// process span the root of a trace of its own instead (linked only), for
// messages that wait hours and would stretch the sender's trace.
//
// Attributes: messaging.system "rmq", messaging.operation.name and .type,
// messaging.destination.name (the topic), messaging.message.id,
// messaging.message.body.size, messaging.destination.partition.id (the slot,
// process spans), and RMQ's own under messaging.rmq: topic.type, attempt and
// outcome (acked, retried, dead, ... as consumer.Outcome names them). A
// failing handler sets the span's status to Error with its message and
// error.type to the error's Go type; an outcome other than acked sets Error
// too. A process span ends when the listener returns; its outcome is added
// when the ack or rollback has been answered, which needs the Telemetry to
// be attached with rmq.WithObserver too (without it the span has no
// outcome).
//
// # Metrics
//
// Attributes messaging.system, messaging.destination.name (the topic) and
// messaging.rmq.topic.type on every instrument but rmq.depth.errors:
//
//	messaging.client.sent.messages     rmq_sent_total
//	rmq.merged                         rmq_merged_total
//	rmq.removed                        rmq_removed_total
//	messaging.client.consumed.messages rmq_delivered_total
//	rmq.acked                          rmq_acked_total (messages completed)
//	rmq.cancelled                      rmq_cancelled_total
//	rmq.retried                        rmq_retried_total
//	rmq.dead                           rmq_dead_total
//	rmq.lease_expired                  rmq_lease_expired_total
//	rmq.expired                        rmq_expired_total
//	messaging.process.duration (s)     rmq_handler_duration_seconds
//	rmq.firing.lateness (s)            rmq_firing_lateness_seconds
//	rmq.store.depth                    rmq_store_depth      } read from Redis at
//	rmq.prepare.depth                  rmq_prepare_depth    } collection time
//	rmq.dead.depth                     rmq_dead_depth       } (WatchQueues)
//	rmq.delayed.depth                  rmq_delayed_depth    }
//	rmq.paused                         rmq_paused           }
//	rmq.retained.depth                 rmq_retained_depth   }
//	rmq.event_log.length               rmq_event_log_length }
//	rmq.depth.errors                   rmq_depth_errors_total
//
// Flows (producer.SendFlow), with messaging.system and
// messaging.destination.name only:
//
//	rmq.flows.started                  rmq_flows_started_total
//	rmq.flow.parents.released          rmq_flow_parents_released_total
//	rmq.flow.parents.failed            rmq_flow_parents_failed_total
//
// The two histograms get the Prometheus module's bucket boundaries as advice.
package rmqotel
