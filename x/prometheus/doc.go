// Package rmqprom exports the metrics of RMQ for Go clients to Prometheus.
// It is a module of its own (github.com/rmq-go/rmq/x/prometheus), so a
// program that does not use it neither downloads nor links client_golang.
//
// Every series carries the labels topic and type (rangemerge, priority,
// fixedtime):
//
//	rmq_sent_total                 successful sends (merged ones included)
//	rmq_merged_total               sends merged into a waiting message with the
//	                               same id (range-merge: due time kept;
//	                               fixed-time/priority: score replaced)
//	rmq_removed_total              waiting messages removed by id
//	rmq_delivered_total            deliveries handed to a listener
//	rmq_acked_total                deliveries acked: messages completed
//	rmq_cancelled_total            deliveries cancelled while their handler
//	                               ran (rmq.Inspector.Cancel, the outcome
//	                               consumer.Cancelled; not retried)
//	rmq_retried_total              deliveries that failed and went back to store
//	rmq_dead_total                 messages moved to the dead queue (by a
//	                               failing handler or an expired lease)
//	rmq_lease_expired_total        deliveries rolled back by the sweeper
//	rmq_expired_total              messages dropped because their TTL or
//	                               expiry passed before they were acked
//	rmq_handler_duration_seconds   how long listeners ran (histogram)
//	rmq_firing_lateness_seconds    delivery time minus due time, time-based
//	                               topics only (histogram)
//	rmq_store_depth                waiting messages      } gauges read from Redis
//	rmq_prepare_depth              deliveries in flight  } at scrape time, for
//	rmq_dead_depth                 dead messages         } every stored topic
//	rmq_delayed_depth              priority messages waiting for their time
//	rmq_paused                     1 while the topic is paused
//	rmq_retained_depth             finished messages (completed or cancelled)
//	                               kept readable (rmq.Lifecycle.Retention)
//	rmq_event_log_length           entries of the topic's event logs
//
// rmq_depth_errors_total counts scrapes whose Redis read failed (the depth
// gauges are left out of such a scrape).
//
// Wiring:
//
//	reg := prometheus.NewRegistry()
//	metrics, err := rmqprom.New(reg)
//	if err != nil { ... }
//	client, err := rmq.New(rdb, rmq.WithObserver(metrics))
//	if err != nil { ... }
//	metrics.WatchQueues(client.Inspector())
//
// The package is named rmqprom, not prometheus, so that it and client_golang's
// prometheus package can be imported side by side without renaming either.
package rmqprom
