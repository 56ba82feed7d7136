// Package rmq is the entry point of RMQ for Go, a library for Redis-backed
// messaging that ordinary brokers do badly: messages that merge when they
// repeat, messages with arbitrary priority, and messages due at an exact
// instant, all consumed at least once through a two-phase protocol
// (prepare, then ack or rollback), with serial per-key consumption across a
// fleet when ZooKeeper is given.
//
// A Client wires a Redis client (a *redis.Client or a *redis.ClusterClient
// of github.com/redis/go-redis/v9), the producer, the consumers of the
// registered topics, the pull API, the schedules and the Inspector, and owns
// the lifecycle of everything it starts (Start, Close).
//
// The packages around this one:
//
//   - topic: what a topic is (a name, a message Type, a slot amount).
//   - producer: the sends (SendRangeMerge, SendPriority, SendFixedTime,
//     SendBatch, SendMany), per-message options and Remove. A program's
//     producer is Client.Producer.
//   - consumer: what a listener sees and sets: Message, MessageListener and
//     ListenerFunc, the per-topic options given to Register, outcomes
//     (RetryAfter, SkipRetry, Snooze), Middleware and the errors a handler
//     context is cancelled with.
//   - slots: the topic slot of a message and the Redis key names of a slot.
//   - luascripts: the Lua sources, to read and audit.
//
// Optional modules, each with its own go.mod so a program that does not use
// them never downloads them: github.com/rmq-go/rmq/x/prometheus (metrics),
// x/otel (traces and metrics), x/forward/nats, x/forward/amqp and
// x/forward/kafka (forward due messages into a broker), and
// github.com/rmq-go/rmq/cmd with rmqd (an HTTP service compatible with
// lmstfy), rmqctl (a command line) and the dashboard (an http.Handler).
//
// # Quick start
//
// A consumer and a producer in one program: a timeout message per order,
// due when the order's payment window closes.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	c, err := rmq.New(rdb)
//	if err != nil {
//		return err
//	}
//	timeouts := topic.MustNew("order-timeouts", topic.FixedTime, 16)
//	err = c.Register(timeouts, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
//		log.Printf("%s: %s", m.ID, m.Body)
//		return nil // nil acks the delivery; an error rolls it back for a retry
//	}))
//	if err != nil {
//		return err
//	}
//	if err := c.Start(ctx); err != nil {
//		return err
//	}
//	defer c.Close(context.Background())
//
//	_, err = c.Producer().SendFixedTime(ctx, timeouts, []byte("cancel unless paid"),
//		time.Now().Add(15*time.Minute), producer.WithKey("order-1001"))
//
// The package's examples (Example, ExampleClient_Pull, ...) run as tests
// against a real redis-server; examples/ in the repository holds whole
// programs, one per use case.
//
// # Topics and message types
//
// A topic has one of three types, fixed when it is first stored:
//
//   - topic.RangeMerge: a message is due a time range after its first
//     send; repeats of the same id sent while it waits merge into one
//     delivery, at the first send's due time, with the latest body
//     (producer.SendRangeMerge).
//   - topic.Priority: delivered highest priority first; a repeat takes
//     the new priority and body (producer.SendPriority, priority at least
//     topic.MinPriority).
//   - topic.FixedTime: due at an exact instant, never before it; a repeat
//     replaces the instant (producer.SendFixedTime).
//
// A message's id is producer.WithKey's key, else derived from its body
// (producer.BodyID), so identical bodies merge. A topic has a power of two
// of slots; a message's slot is CRC32 of its slot basis (the id, or
// producer.WithSlotBasis) modulo the slot amount. Each slot is one Redis
// hash tag, so a topic spreads over the masters of a cluster, and every
// script call touches one slot.
//
//	prices := topic.MustNew("price-changes", topic.RangeMerge, 8)
//	_, err := c.Producer().SendRangeMerge(ctx, prices, []byte("sku-42"), 5*time.Second,
//		producer.WithKey("sku-42"))
//
// # Consuming
//
// Register a listener per topic before Start. Consumption is at least once:
// a fetch moves due messages from a slot's store to its prepare set (a
// lease, kept alive while the listener runs), and the delivery ends with an
// ack (the listener returned nil) or a rollback (it returned an error,
// panicked, ran past its timeout, or its lease ran out). A message that
// failed more than its retries (consumer.WithMaxRetries, default 16) moves
// to the topic's dead queue. Fetching does not poll: a topic's fetcher
// sleeps until its next head comes due and is woken by a Redis
// notification when a send makes a new head.
//
//	err := c.Register(jobs, consumer.ListenerFunc(handle),
//		consumer.WithConcurrency(64),             // handlers of this topic in this process
//		consumer.WithMaxRetries(5),               // then the dead queue
//		consumer.WithHandlerTimeout(time.Minute), // the handler's context ends then
//	)
//
// A listener chooses how a failure is retried by the error it returns:
// consumer.RetryAfter(d, err) retries after d, consumer.SkipRetry(err)
// goes to the dead queue at once, consumer.Snooze(d) comes back after d
// without counting an attempt. Client options (WithPrefix, WithLogger,
// WithObserver, WithMiddleware, WithMaxBodySize, WithSendHook) apply to
// every topic and to the producer; consumer options to one topic.
//
// # Pull
//
// Instead of a listener, a caller may take messages when it wants them:
// Pull leases up to n due messages of the topics it names (WithLease,
// default DefaultLease; WithWait long-polls), and every Delivery ends with
// Ack or Nack, or is kept with Extend. AckByID (AckByIDWithResult with a
// result) and NackByID end a delivery by its id alone, for stateless
// callers such as an HTTP service. The
// client must be started (ErrNotStarted), and Pull is refused in ZooKeeper
// mode (ErrInvalidPull).
//
//	ds, err := c.Pull(ctx, []topic.Topic{jobs}, 10, rmq.WithLease(time.Minute), rmq.WithWait(5*time.Second))
//	for _, d := range ds {
//		if err := work(d.Body); err != nil {
//			_ = d.Nack(ctx, 0, err) // 0: the topic's backoff
//			continue
//		}
//		_ = d.Ack(ctx)
//	}
//
// # Serial consumption with ZooKeeper
//
// WithZooKeeper makes the clients of a fleet share every topic's slots:
// each slot has exactly one owner at a time, which handles its messages
// one after another in score order, so messages that share a slot basis
// are handled serially and in order. Ownership moves when workers join,
// leave or die, and is fenced by an owner epoch in Redis that every fetch,
// ack, rollback, extension and sweep names; Message.Epoch hands it to the
// handler as a fencing token for the systems it writes to.
//
//	c, err := rmq.New(rdb, rmq.WithZooKeeper([]string{"zk1:2181", "zk2:2181", "zk3:2181"},
//		rmq.ZKSessionTimeout(10*time.Second)))
//
// # Flow control
//
// Limits hold across every consumer of a topic: a rate
// (consumer.WithRateLimit), a topic-wide concurrency
// (consumer.WithGlobalConcurrency), and per group of messages
// (producer.WithGroup) a concurrency (consumer.WithGroupConcurrency; 1
// makes each group serial without ZooKeeper) and a rate
// (consumer.WithGroupRateLimit). Groups are served in turn. The limits are
// stored with the topic: Inspector.SetLimits changes them at run time for
// every consumer. consumer.WithAdaptiveConcurrency adapts one process's
// concurrency to its handlers' latency.
//
//	err := c.Inspector().SetLimits(ctx, jobs, rmq.Limits{Rate: 100, RatePer: time.Second, GroupConcurrency: 1})
//
// # Schedules
//
// Schedules (Client.Schedules) send one message at every tick of a cron
// spec or interval; every started client takes part in firing them
// (WithoutScheduler opts out) and each tick fires once across the fleet,
// never early.
//
//	err := c.Schedules().Set(ctx, rmq.Schedule{
//		Name: "nightly-report", Spec: "30 2 * * *", Location: berlin,
//		Topic: reports, Body: []byte(`{"report":"daily"}`), CatchUp: 2 * time.Hour,
//	})
//
// # Inspecting and repairing
//
// The Inspector (Client.Inspector, or NewInspector without a client) reads
// a topic's Stats, lists waiting (Peek) and dead messages (Dead, with a
// cursor), finds one message wherever it is (Message), requeues and
// deletes dead messages, removes waiting ones, pauses and resumes a topic
// and stores its flow limits. rmqctl and the dashboard are built on it.
//
//	st, err := c.Inspector().Stats(ctx, jobs)
//	fmt.Println(st.Store, st.Prepare, st.Dead, st.Lag())
//	n, err := c.Inspector().RequeueAll(ctx, jobs)
//
// # A job's life after hand-off
//
// A topic can retain its finished messages with their results and keep an
// event log (Lifecycle, stored with the topic like its limits:
// Inspector.SetLifecycle). Client.Wait returns when a message finishes
// (completed, ErrDead or ErrCancelled), told through one subscription per
// slot, not polling; Inspector.Cancel cancels a waiting or running one;
// Client.Events follows a topic's transitions from a cursor.
//
//	m, err := c.Wait(ctx, jobs, id) // m.Result; errors.Is(err, rmq.ErrDead)
//
// # Observing
//
// An Observer given to WithObserver is told of every send, removal and
// delivery (embed BaseObserver to implement only some methods), and of
// more through its optional extensions (TopicObserver, ExpiryObserver,
// PauseObserver, FenceObserver, ScheduleObserver, FlowObserver).
// WithMiddleware wraps every listener; WithSendHook sees every outgoing
// message and may add headers. The module x/prometheus is an Observer;
// x/otel provides all three. Logging goes to the *slog.Logger of
// WithLogger.
//
// # Errors
//
// Every error of the module starts with "rmq: " and is matched with
// errors.Is against an exported sentinel; errors of a client's step are
// wrapped with the step ("rmq: start orders: topic conflicts with its
// stored definition" matches topic.ErrConflict). This package's:
// ErrStarted (Register after Start, a second Start), ErrClosed, ErrNotStarted,
// ErrDuplicateTopic, ErrInvalidOption (a bad client or consumer option),
// ErrInvalidPull, ErrInvalidLimits, ErrInvalidSchedule, ErrScheduleNotFound
// and, from the Inspector, ErrUnknownTopic, ErrMessageNotFound,
// ErrInvalidCursor and ErrInvalidPageSize; of a message's life, ErrDead,
// ErrCancelled, ErrInvalidLifecycle and ErrInvalidEventCursor. Sends fail with the producer's
// sentinels (producer.ErrEmptyBody, producer.ErrTypeMismatch, ...); a
// handler context is cancelled with consumer.ErrLeaseLost or
// consumer.ErrFenced as its cause. Errors from Redis come through as
// go-redis returned them.
//
// # Concurrency and shutdown
//
// A Client, its Producer, Inspector and Schedules are safe for concurrent
// use. The producer holds no goroutine: it works before Start and after
// Close, and a producer alone is rmq.New(rdb).Producer(). Start checks
// Redis, stores the topic definitions (refusing conflicting ones with
// topic.ErrConflict) and starts every consumer; its ctx bounds the start-up
// only. A Start that failed still needs Close. Close stops everything the
// client started and returns when every goroutine ended: handlers in
// flight may finish until Close's ctx is done, the rest are rolled back
// (their last error is consumer.ErrShutdown). A clean Close leaves nothing
// in prepare. A listener runs on a goroutine of its own per delivery, up to
// the topic's concurrency; Observer methods are called synchronously and
// must not block.
//
// # Goroutines
//
// Every background goroutine is an actor of one shape (internal/lifecycle):
// a run(ctx) method started by its owner's group, whose name below is also
// the goroutine's pprof label "rmq", so a goroutine dump says which actor
// a goroutine is. The consumer engine (internal/engine) has one part per
// client, the hub, shared by all its topics, and one engine per topic
// (pushed, or made by the first Pull or NackByID of a topic). Each job has
// its room, a package below internal/engine that never imports the engine:
// fetcher (the fetch loop and its plan), redisops (a topic's script calls:
// fetch, rollback, extend, sweep), ack (the ack rounds), hold (lookahead's
// holder), lease (the sweeper and the lease keeper), wake (the
// subscriptions and the pauser), flow (limits, a cluster's permits,
// adaptive concurrency), ownership (ZooKeeper mode's slots and fencing),
// fetchmux (a single node's shared fetch rounds), clock and timerq; the
// engine keeps the deliveries, pull and the hub. The owner column names
// the room where the actor's code lives. A client runs these:
//
//	actor              owner                  what it does                        starts                 stops
//	-----------------  ---------------------  ----------------------------------  ---------------------  ---------------------
//	scheduler          Client                 rolls schedules forward             Start (unless          Close, first
//	                                                                              WithoutScheduler)
//	pauser             hub (wake)             reads the paused hash after a       the first engine's     hub close
//	                                          pause, resume or resubscription     Start
//	wake receiver      hub (wake; single      the one subscription to every       the first engine's     hub close
//	                   node)                  slot's wake channel                 Start
//	shard waker        hub (wake; cluster)    one sharded subscription per        the first engine's     hub close
//	                                          master, following the cluster       Start
//	shard receiver     shard waker (wake)     reads one master's subscription     its connection made    its connection closed,
//	                                                                                                     or the shard waker's end
//	sweeper            hub (lease)            rolls back leases that ran out,     the first engine's     hub close
//	                                          woken by the earliest deadline      Start
//	lease keeper       hub (lease)            extends the leases of deliveries    the first engine's     hub close (after the
//	                                          in flight                           Start                  extensions it started)
//	ack rounds         hub (ack)              sends the pushed deliveries' acks   the first engine's     hub close (after the
//	                                          of every topic in shared rounds     Start                  acks still queued)
//	holder             hub (hold)             hands messages taken ahead          the first engine's     hub close
//	                                          (WithLookahead) over at their       Start
//	                                          instant
//	fetcher            engine (fetcher;       sleeps until the next head is due,  engine Start           engine close, first
//	                   pushed)                fetches, starts handlers
//	adaptive reporter  engine (flow; pushed,  writes the topic's adaptive limit   engine Start           engine close, first
//	                   with WithAdaptive-     to Redis                                                   (it removes its report)
//	                   Concurrency)
//	zk loop,           ZooKeeper coordinator  slot assignment and the session's   Start                  after the engines
//	zk heartbeat                              proof of life                                              drained
//	zk register,       ZooKeeper coordinator  single ZooKeeper calls              the loop, as needed    their call's end
//	listing, slot,
//	leave
//
// Besides the actors, an engine starts one goroutine per delivery (its
// handler, from the fetch until its ack or rollback is queued; messages
// taken ahead of their instant get theirs when they are taken), counted by
// the engine's handlers WaitGroup, and some calls fan out to goroutines
// that end before the call returns (the holder's confirm calls, the lease
// keeper's extensions).
//
// # Order of Close
//
// Close ends them in this order (each step is written where it happens, in
// client.go and internal/engine/engine.go):
//
//  1. The scheduler stops: it sends ticks.
//  2. ZooKeeper mode: the worker leaves the fleet, so no new slot comes.
//  3. Every engine closes, in parallel: its fetcher stops (no new
//     delivery); messages held ahead of their instant and prefetched ones
//     that never started go back to store with no attempt counted; its
//     wake-ups and sweeps end; its handlers drain until Close's ctx is done
//     (the rest are rolled back); ZooKeeper mode gives what is left in
//     prepare back to store at its place (ownership); a cluster's
//     concurrency permits go back (flow); its lease keeping ends last
//     (lease).
//  4. The ZooKeeper session ends, which hands the slots to other workers.
//     Then the waits under way end with ErrClosed and their
//     subscriptions close (Client.Wait).
//  5. The hub closes, stopping its actors (the ack rounds send what is
//     queued first).
//
// # Redis keys and who writes them
//
// All keys start with the prefix (WithPrefix, default "rmq"). A topic
// slot's keys share the hash tag {<topic>:<index>:<n>}, n placing the tag
// on a chosen cluster hash slot (keyspace.KeysFor builds them). Every write of
// more than one key is one Lua script (luascripts) whose keys share one hash
// tag (on a single node one call may carry several slots' key groups).
// The engine's writers are named by room (internal/engine/...):
//
//	key                                     writers
//	--------------------------------------  -----------------------------------------------
//	<slot>:store, :msg, :delayed            producer (send1, sendbatch, gsend, remove),
//	                                        redisops (fetch, rollback, sweep), ack (ack),
//	                                        hold and engine close (release), ownership
//	                                        (takeover), Inspector (requeue, remove),
//	                                        schedules
//	<slot>:prepare                          redisops (fetch, rollback, extend, sweep),
//	                                        ack (ack), hold (confirm, release),
//	                                        ownership (takeover); remove leaves a
//	                                        tombstone
//	<slot>:dead, :deadmsg                   redisops (rollback and sweep, past the
//	                                        retries), Inspector (requeue, deletedead)
//	<slot>:wake (channel)                   published by the scripts that change a head;
//	                                        read by the hub's wake receiver or shard waker
//	<slot>:epoch                            ownership, ZooKeeper mode (takeover);
//	                                        read by every fenced script
//	<slot>:gq, :gocc, :gturn, :grate        flow control's groups (gsend; redisops'
//	                                        fetch, rollback, sweep; ack), keys named by
//	                                        flow
//	<slot>:uniq, :uniqn                     unique sends' claims (sendbatch, gsend:
//	                                        producer.WithUniqueFor)
//	<slot>:sched:due, :state, :def, :msg    schedules (schedule.lua) and the scheduler
//	{<topic>}:flow, :holders, :permits      flow control's topic-wide rate and places
//	                                        (fetch, ack, rollback, sweep on a single
//	                                        node; flow's permit on a cluster)
//	{<topic>}:adaptive                      the adaptive reporter (flow)
//	topics                                  Start, Schedules.Set, producers (a lost
//	                                        definition again)
//	paused                                  Inspector.Pause and Resume; read by the pauser
//	                                        (wake)
//	limits                                  Inspector.SetLimits, a consumer's limit options
//	                                        when none are stored (flow)
//	grouped                                 the producer, before a topic's first group
//	schedules, schedules:events (channel)   Schedules and the scheduler
//
// # Further reading
//
// In the repository: README.md (a tour), docs/api.md (the rules of each
// type, options by scope, errors), docs/jobs.md (per-message options,
// outcomes, pull, pause), docs/schedules.md, docs/flow-control.md,
// docs/zookeeper.md, docs/cluster.md, docs/forwarding.md,
// docs/observability.md, docs/operations.md (production Redis, ACL,
// rmqctl), docs/rmqd.md, docs/dashboard.md, docs/design.md (the data
// model, the scripts' invariants and the tests that pin them),
// docs/performance.md and CHANGELOG.md.
package rmq
