module github.com/rmq-go/rmq/x/forward/amqp

go 1.26.0

require (
	github.com/rmq-go/rmq v0.0.0
	github.com/stretchr/testify v1.12.1
)

require (
	github.com/go-zookeeper/zk v1.0.4 // indirect
	github.com/google/uuid v1.6.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/rabbitmq/amqp091-go v1.16.0
	github.com/redis/go-redis/v9 v9.23.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

replace github.com/rmq-go/rmq => ../../..
