// Package api serves rmqd's lmstfy-compatible queue API: publish (single,
// bulk, republish), consume, ack, nack, peek, size, destroy, the dead
// letter and the schedules of a queue. Its routes are methods of handlers,
// a view of the service.Service; Handler wires them behind the service's
// token check, throttle and middleware.
package api
