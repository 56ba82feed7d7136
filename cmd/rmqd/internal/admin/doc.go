// Package admin serves rmqd's admin listener: tokens and their limits,
// queue info, pause and flow limits, forwards, the operational routes
// (version, pools, info, metrics, access log) and the dashboard mount. Its
// routes are methods of handlers, a view of the service.Service.
package admin
