package rmqotel_test

import (
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/rmq"
	rmqotel "github.com/rmq-go/rmq/x/otel"
)

// Attach the telemetry to a client: metrics and outcomes through the
// observer; spans through the send hook and the middleware.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	tel, err := rmqotel.New() // the global tracer and meter providers
	if err != nil {
		log.Fatal(err)
	}
	client, err := rmq.New(rdb,
		rmq.WithObserver(tel),
		rmq.WithSendHook(tel.SendHook),
		rmq.WithMiddleware(tel.Middleware),
	)
	if err != nil {
		log.Fatal(err)
	}
	tel.WatchQueues(client.Inspector())
}
