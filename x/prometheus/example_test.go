package rmqprom_test

import (
	"log"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/rmq"
	rmqprom "github.com/rmq-go/rmq/x/prometheus"
)

// Attach the metrics to a client, measure its queues and serve them.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	reg := prometheus.NewRegistry()
	metrics, err := rmqprom.New(reg)
	if err != nil {
		log.Fatal(err)
	}
	client, err := rmq.New(rdb, rmq.WithObserver(metrics))
	if err != nil {
		log.Fatal(err)
	}
	metrics.WatchQueues(client.Inspector())
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
}
