// Package service is rmqd's state shared by both listeners: the pools,
// the token and limit stores, the metrics and the guard, and the request
// pipeline over them (token check, throttle, middleware, router, admin
// gate). The api and admin packages serve their routes over it.
package service
