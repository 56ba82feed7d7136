// Package dashboard is RMQ's web dashboard as an http.Handler that a host
// mounts in its own server: every topic's queues at a glance, live charts,
// waiting, in-flight and dead messages paged by cursor, and the repairs an
// operator needs (requeue or delete dead messages, remove a waiting one,
// find a message by id), each confirmed before it runs.
//
// Mount it under a path of your choice; every link it writes is relative,
// so http.StripPrefix is all it needs:
//
//	mux := http.NewServeMux()
//	mux.Handle("/rmq/", http.StripPrefix("/rmq", dashboard.New(rdb,
//		dashboard.WithKeyPrefix("rmq"),   // the rmq.WithPrefix of your clients
//		dashboard.WithAuth(requireAdmin), // your own authentication
//	)))
//
// Without StripPrefix, pass the mount path with WithPathPrefix.
//
// The overview and every topic's page draw the last hour, 24 hours or 72
// hours of the topic's history — sent, completed, retried, dead, expired,
// cancelled, forwarded, handler time and firing lateness — from the
// per-minute counts every client writes to Redis (rmq.Inspector.History):
// the charts have their points as soon as a page loads, whichever process
// serves it and since when. The Workers page lists every running client
// (rmq.Inspector.Workers). A topic's settings page edits its flow-control
// limits and lifecycle (retention of finished messages, event log), and
// the finished listing of a retaining topic finds a message by id.
// WithPage adds a page of the host's (rmqd's token page) in the
// dashboard's own layout and navigation.
//
// For workers in ZooKeeper mode, WithZooKeeper adds a page of which worker
// owns which slot of each topic, and each slot's owner epoch.
//
// Redis holds queue depths, not counters: for the charts of messages sent,
// acked, retried and dead per second and the firing-lateness histogram,
// attach a Counters to the client and pass it on:
//
//	ctr := dashboard.NewCounters()
//	client, err := rmq.New(rdb, rmq.WithObserver(ctr))
//	...
//	h := dashboard.New(rdb, dashboard.WithCounters(ctr))
//
// A host that forwards topics to a message broker (rmqd's --forward, or a
// listener of x/forward) passes its forwards with WithForwards: the
// overview then lists each with where it goes, its counts and its last
// error, and a forwarded topic's page says where its messages go.
//
// # Safety
//
// The dashboard authenticates nobody: WithAuth wraps it in the host's
// authentication, and WithReadOnly removes every action. A request that is
// not GET or HEAD is refused (403) unless the browser says it came from a
// page of the same origin (Sec-Fetch-Site, else Origin, else Referer
// naming the host it was sent to: CrossSite, which a host may apply to its
// own routes) and it carries the CSRF token of the page it came from (a
// cookie and an HMAC of it in the form). Pages are html/template
// output with a Content-Security-Policy that allows only the dashboard's
// own script and stylesheet, so a message body is shown as text, never run.
//
// # Cost
//
// Every page reads counts (ZCARD, ZCOUNT) and one page of entries per
// listing, found by rank from its cursor: no page scans a queue, so pages
// answer in milliseconds on topics with millions of messages. The
// dashboard starts no goroutine; the live charts are drawn by the browser
// from a JSON snapshot it polls every two seconds, and cost one snapshot
// (a few commands per topic slot) per open overview and poll. The
// ZooKeeper page opens a ZooKeeper connection per request and closes it,
// and its goroutines, before it answers.
package dashboard
