package readmetest

// goSetup is what a docs page's Go fragment takes as given: the package
// level declarations of the names it uses without declaring them (a
// client, a topic, a context), and code run after it that checks what the
// page claims about it. A fragment with init also runs: init gives the
// names real values (a client of the test's redis-server, through the
// docenv package of the wrapper module) and may return an error, after
// returns one when the page's claim does not hold.
// replace names a literal of the fragment and the expression it runs with
// (the page's Redis or ZooKeeper addresses: the test's servers instead).
type goSetup struct {
	given, init, after string
	replace            []string // old, new, ...
}

// goSetups holds a setup for every block marked <!-- doc-test: go NAME -->
// in docs/*.md, by NAME. A new fragment needs an entry; an entry no page
// uses any more fails the test too.
var goSetups = map[string]goSetup{
	"history": {given: `var (
	ctx    context.Context
	client *rmq.Client
	orders topic.Topic
	show   func(...any)
)`, init: `ctx, orders = context.Background(), topic.MustNew("orders", topic.FixedTime, 4)
	show = func(...any) {}
	// A client handles three orders and closes (which writes its counts).
	c := docenv.Client("history")
	done := make(chan struct{}, 3)
	if err := c.Register(orders, consumer.ListenerFunc(func(context.Context, *consumer.Message) error { done <- struct{}{}; return nil })); err != nil { return err }
	if err := c.Start(ctx); err != nil { return err }
	for i := range 3 {
		if _, err := c.Producer().SendFixedTime(ctx, orders, []byte(fmt.Sprint("order-", i)), time.Now()); err != nil { return err }
	}
	for range 3 { <-done }
	if err := c.Close(ctx); err != nil { return err }
	client = docenv.Client("history")`,
		// The page's claim: the history counts what the client did; a
		// closed client is no worker.
		after: `if err != nil { return err }
var sent, completed int64
for _, p := range points { sent, completed = sent+p.Sent, completed+p.Completed }
if sent != 3 || completed != 3 || len(workers) != 0 { return fmt.Errorf("history: %d sent, %d completed, %d workers; want 3, 3, 0", sent, completed, len(workers)) }`},
	"api-setup": {given: `var (
	logger      *slog.Logger
	listener    consumer.MessageListener
	ctx         context.Context
	shutdownCtx context.Context
)`, replace: []string{`"127.0.0.1:6379"`, "docenv.Addr()"},
		init: `logger = slog.New(slog.DiscardHandler)
	listener = consumer.ListenerFunc(func(context.Context, *consumer.Message) error { return nil })
	ctx, shutdownCtx = context.Background(), context.Background()`,
		after: `if err != nil { return err }`},
	"api-fixedtime": {given: `var (
	ctx    context.Context
	p      *producer.Producer
	orders topic.Topic
	body   []byte
)`, init: `ctx, body = context.Background(), []byte("order 42")
	orders = topic.MustNew("orders", topic.FixedTime, 16)
	p = docenv.Client("api-fixedtime").Producer()`,
		after: `if err != nil || where != producer.RemovedWaiting {
	return fmt.Errorf("Remove: %v, %v; the page says RemovedWaiting", where, err)
}`},
	"api-rangemerge": {given: `var (
	ctx    context.Context
	p      *producer.Producer
	prices topic.Topic
)`, init: `ctx, prices = context.Background(), topic.MustNew("prices", topic.RangeMerge, 16)
	p = docenv.Client("api-rangemerge").Producer()`,
		after: `if err != nil { return err }`},
	"api-priority": {given: `var (
	ctx  context.Context
	p    *producer.Producer
	jobs topic.Topic
	body []byte
)`, init: `ctx, body, jobs = context.Background(), []byte("job"), topic.MustNew("jobs", topic.Priority, 4)
	p = docenv.Client("api-priority").Producer()`,
		after: `if err != nil || 100 < topic.MinPriority { return fmt.Errorf("%v (MinPriority %d)", err, topic.MinPriority) }`},
	// The page's Message is consumer.Message's exported fields, in order,
	// of the same types (consumer.Message also has unexported ones, so a
	// conversion between the two cannot check it).
	"api-message": {init: `_ = 0`, after: `exported := func(t reflect.Type) (out []string) {
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() {
			out = append(out, f.Name+" "+f.Type.String())
		}
	}
	return out
}
if want, got := exported(reflect.TypeOf(consumer.Message{})), exported(reflect.TypeOf(Message{})); !slices.Equal(want, got) {
	return fmt.Errorf("the page's Message has %v; consumer.Message has %v", got, want)
}`},
	"api-inspector": {given: `var (
	ctx    context.Context
	client *rmq.Client
	orders topic.Topic
)`, init: `ctx, orders = context.Background(), topic.MustNew("orders", topic.FixedTime, 8)
	client = docenv.Client("api-inspector")
	if err := docenv.MakeDead("api-inspector", orders, "order-1001", "order-1002", "order-1003"); err != nil { return err }`,
		// Read before the repairs: three dead on one page; then the
		// requeues bring all three back, waiting.
		after: `if len(page) != 3 || len(more) != 0 || m.ID != "order-1002" || st.Dead != 3 || len(all) != 1 || len(topics) != 1 || len(waiting) != 3 {
	return fmt.Errorf("dead page %d, next %d, dead message %q, stats %+v, %d stats, %d topics, waiting %d", len(page), len(more), m.ID, st, len(all), len(topics), len(waiting))
}`},
	"api-life": {given: `var (
	ctx    context.Context
	client *rmq.Client
	p      *producer.Producer
	orders topic.Topic
	body   []byte
)`, init: `ctx, body, orders = context.Background(), []byte("order 7"), topic.MustNew("orders", topic.FixedTime, 8)
	client = docenv.Client("api-life")
	defer client.Close(ctx)
	p = client.Producer()`,
		after: `if !cancelled || !errors.Is(err, rmq.ErrCancelled) || m.State != rmq.StateCancelled || string(m.Body) != "order 7" {
	return fmt.Errorf("cancelled %v, Wait %v in state %q; the page says a cancelled message ends its Wait with ErrCancelled", cancelled, err, m.State)
}
if len(seen) != 2 || seen[0].Type != rmq.EventSent || seen[1].Type != rmq.EventCancelled || seen[0].MessageID != "order-7" || seen[1].MessageID != "order-7" || seen[1].Attempt != 0 {
	return fmt.Errorf("events %+v; the page says order-7's sent, then its cancelled, attempt 0", seen)
}`},
	"dashboard-mount": {given: `var (
	rdb          *redis.Client
	requireAdmin func(http.Handler) http.Handler
	zkServers    []string
)`, init: `rdb = docenv.Redis()
	requireAdmin = func(h http.Handler) http.Handler { return h }`,
		after: `if err != nil { return err }
rec := httptest.NewRecorder()
mux.ServeHTTP(rec, httptest.NewRequest("GET", "/rmq/", nil))
if rec.Code != http.StatusOK { return fmt.Errorf("GET /rmq/: %d", rec.Code) }`},
	// Compile-only: option values, which the Register and send fragments
	// use; the flow tests of package rmq run them.
	"flow-options": {},
	"jobs-options": {given: `var (
	ctx  context.Context
	p    *producer.Producer
	jobs topic.Topic
	body []byte
	tp   string
)`, init: `ctx, body, jobs = context.Background(), []byte("job"), topic.MustNew("jobs", topic.Priority, 4)
	tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	p = docenv.Client("jobs-options").Producer()`,
		after: `if err != nil { return err }`},
	// Compile-only: a listener's return statements.
	"jobs-outcomes": {given: `var err error`},
	"flows-send": {given: `var (
	ctx             context.Context
	client          *rmq.Client
	albums, resizes topic.Topic
)

func buildAlbum([]byte, []consumer.ChildResult) error { return nil }`, init: `ctx = context.Background()
	albums, resizes = topic.MustNew("albums", topic.FixedTime, 4), topic.MustNew("resizes", topic.Priority, 4)
	client = docenv.Client("flows-send")`,
		after: `_ = albumHandler
if err != nil || id != "album-7" { return fmt.Errorf("SendFlow: %q, %v; the page says album-7", id, err) }`},
	"flows-group": {given: `var (
	ctx           context.Context
	client        *rmq.Client
	reports, jobs topic.Topic
	days          [][]byte
	start         time.Time
)`, init: `ctx, start = context.Background(), time.Now()
	reports, jobs = topic.MustNew("reports", topic.FixedTime, 4), topic.MustNew("days", topic.FixedTime, 4)
	days = [][]byte{[]byte("day 1"), []byte("day 2"), []byte("day 3")}
	client = docenv.Client("flows-group")`,
		after: `if err != nil || id == "" { return fmt.Errorf("SendFlow: %q, %v", id, err) }
if info, err := client.Inspector().Flow(ctx, reports, id); err != nil || len(info.Children) != 3 || info.Node.State != rmq.StateWaitingChildren {
	return fmt.Errorf("the report's flow: %+v, %v; the page says it waits for its three days", info, err)
}`},
	"jobs-unique": {given: `var (
	ctx      context.Context
	p        *producer.Producer
	receipts topic.Topic
	body     []byte
)`, init: `ctx, body = context.Background(), []byte("receipt")
	receipts = topic.MustNew("receipts", topic.RangeMerge, 4)
	p = docenv.Client("jobs-unique").Producer()`,
		// The page's claim: the same send again within the day is refused.
		after: `if err != nil { return err }
if _, err := p.SendRangeMerge(ctx, receipts, body, 0, producer.WithKey("order-1001"), producer.WithUniqueFor(24*time.Hour)); !errors.Is(err, producer.ErrDuplicate) {
	return fmt.Errorf("the repeat within the day: %v; the page says ErrDuplicate", err)
}`},
	"jobs-pause": {given: `var (
	ctx    context.Context
	client *rmq.Client
	jobs   topic.Topic
)`, init: `ctx, jobs = context.Background(), topic.MustNew("jobs", topic.Priority, 4)
	client = docenv.Client("jobs-pause")`,
		after: `if err != nil { return err }
if paused, err := client.Inspector().Paused(ctx, jobs); err != nil || paused { return fmt.Errorf("paused after Resume: %v, %v", paused, err) }`},
	"jobs-pull": {given: `var (
	ctx            context.Context
	client         *rmq.Client
	urgent, normal topic.Topic
	id             string
)

func work([]byte) error { return nil }`, init: `ctx = context.Background()
	urgent, normal = topic.MustNew("urgent", topic.FixedTime, 4), topic.MustNew("normal", topic.FixedTime, 4)
	client = docenv.Client("jobs-pull")
	if err := client.Start(ctx); err != nil { return err }
	defer client.Close(ctx)
	if _, err := client.Producer().SendFixedTime(ctx, normal, []byte("n"), time.Now(), producer.WithKey("n1")); err != nil { return err }
	if _, err := client.Producer().SendFixedTime(ctx, urgent, []byte("u"), time.Now(), producer.WithKey("u1")); err != nil { return err }
	id = "n1"`,
		after: `if err != nil || len(ds) != 2 || ds[0].ID != "u1" || ok { return fmt.Errorf("pulled %d (first topic's first), NackByID %v, %v", len(ds), ok, err) }`},
	"jobs-middleware": {given: `var (
	rdb     *redis.Client
	jobs    topic.Topic
	handler consumer.MessageListener
)

func timing(l consumer.MessageListener) consumer.MessageListener { return l }`, init: `rdb, jobs = docenv.Redis(), topic.MustNew("jobs", topic.Priority, 4)
	handler = consumer.ListenerFunc(func(context.Context, *consumer.Message) error { return nil })`},
	"prometheus": {given: `var rdb *redis.Client`, init: `rdb = docenv.Redis()`},
	"otel":       {given: `var rdb *redis.Client`, init: `rdb = docenv.Redis()`},
	"schedules": {given: `var (
	ctx     context.Context
	client  *rmq.Client
	berlin  *time.Location
	reports topic.Topic
)`, init: `ctx, reports = context.Background(), topic.MustNew("reports", topic.FixedTime, 4)
	client = docenv.Client("schedules")
	var err error
	if berlin, err = time.LoadLocation("Europe/Berlin"); err != nil { return err }`,
		after: `if err != nil || info.Spec != "30 2 * * *" || id == "" || len(ticks) != 5 || ticks[0].In(berlin).Format("15:04") != "02:30" {
	return fmt.Errorf("Set %v; Get %+v; Trigger %q; ticks %v", err, info, id, ticks)
}
if _, err := s.Get(ctx, "nightly-report"); err == nil { return fmt.Errorf("Get after Remove found the schedule") }`},
	// The page's ZooKeeper ensemble is the test's ZooKeeper server.
	"zookeeper": {given: `var (
	ctx         context.Context
	rdb         *redis.Client
	orderEvents topic.Topic
	handler     consumer.MessageListener
	body        []byte
	at          time.Time
	orderID     string
)`, replace: []string{`[]string{"zk1:2181", "zk2:2181", "zk3:2181"}`, "docenv.ZooKeeper()"},
		init: `ctx, rdb, body, at, orderID = context.Background(), docenv.Redis(), []byte("paid"), time.Now().Add(time.Hour), "order-42"
	orderEvents = topic.MustNew("order-events", topic.FixedTime, 8)
	handler = consumer.ListenerFunc(func(context.Context, *consumer.Message) error { return nil })`,
		after: `if err != nil { return err }
defer c.Close(ctx)
if st, err := c.Inspector().Stats(ctx, orderEvents); err != nil || st.Store != 1 { return fmt.Errorf("after the send: %+v, %v", st, err) }`},
	// Compile-only: it needs an SQL database.
	"zookeeper-epoch": {given: `var (
	ctx context.Context
	db  *sql.DB
	m   *consumer.Message
)

func status(*consumer.Message) string  { return "" }
func orderID(*consumer.Message) string { return "" }`},
}

// importPaths are the packages a fragment may use without importing them,
// by the name it uses.
var importPaths = map[string]string{
	"context":    "context",
	"errors":     "errors",
	"fmt":        "fmt",
	"reflect":    "reflect",
	"slices":     "slices",
	"http":       "net/http",
	"slog":       "log/slog",
	"sql":        "database/sql",
	"time":       "time",
	"redis":      "github.com/redis/go-redis/v9",
	"rmq":        "github.com/rmq-go/rmq/rmq",
	"producer":   "github.com/rmq-go/rmq/producer",
	"consumer":   "github.com/rmq-go/rmq/consumer",
	"topic":      "github.com/rmq-go/rmq/topic",
	"slots":      "github.com/rmq-go/rmq/slots",
	"dashboard":  "github.com/rmq-go/rmq/cmd/dashboard",
	"prometheus": "github.com/prometheus/client_golang/prometheus",
	"rmqprom":    "github.com/rmq-go/rmq/x/prometheus",
	"rmqotel":    "github.com/rmq-go/rmq/x/otel",
	"httptest":   "net/http/httptest",
	"docenv":     "example.com/docs/docenv",
}

// docenv is the wrapper module's package that gives running fragments a
// real Redis (REDIS_URL) and clients of their own key prefix.
const docenv = `package docenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

var rdb *redis.Client

// Redis returns a client of the redis-server REDIS_URL names.
func Redis() *redis.Client {
	if rdb == nil {
		opt, err := redis.ParseURL(os.Getenv("REDIS_URL"))
		if err != nil {
			panic(err)
		}
		rdb = redis.NewClient(opt)
	}
	return rdb
}

func opts(prefix string) []rmq.Option {
	return []rmq.Option{rmq.WithPrefix("docs-" + prefix), rmq.WithLogger(slog.New(slog.DiscardHandler))}
}

// Addr returns the address of the redis-server REDIS_URL names.
func Addr() string { return Redis().Options().Addr }

// ZooKeeper returns the ZooKeeper server ZK_ADDR names.
func ZooKeeper() []string { return []string{os.Getenv("ZK_ADDR")} }

// Client returns a client of the key prefix docs-PREFIX, logging nothing.
func Client(prefix string) *rmq.Client {
	c, err := rmq.New(Redis(), opts(prefix)...)
	if err != nil {
		panic(err)
	}
	return c
}

// MakeDead sends ids to t under docs-PREFIX, due now, one after another,
// each once the one before has died in a client whose listener fails and
// that retries none: they die in the order given.
func MakeDead(prefix string, t topic.Topic, ids ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := rmq.New(Redis(), opts(prefix)...)
	if err != nil {
		return err
	}
	fail := consumer.ListenerFunc(func(context.Context, *consumer.Message) error { return errors.New("payment service unavailable") })
	if err := c.Register(t, fail, consumer.WithMaxRetries(0)); err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	defer c.Close(ctx)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for i, id := range ids {
		if _, err := c.Producer().SendFixedTime(ctx, t, []byte(id), time.Now(), producer.WithKey(id)); err != nil {
			return err
		}
		for {
			st, err := c.Inspector().Stats(ctx, t)
			if err == nil && st.Dead == int64(i+1) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s did not die: %v", id, ctx.Err())
			case <-tick.C:
			}
		}
	}
	return nil
}
`
