package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// The life case's latencies across processes: the consumer runs in a
// child process (this binary again, in the role lifeWorkerEnv names), the
// Wait and the Cancel in the bench's, as a service waiting for jobs that
// workers elsewhere finish would. The word crosses Redis either way (a
// finishing script publishes it on the slot's channel; in one process too,
// the Wait's subscription is a connection of its own), so these add what
// separate processes add: the other process's scheduling, and the child's
// report of its handler's time over a pipe (one clock: one machine).
const (
	lifeWorkerEnv     = "RMQ_BENCH_LIFE_WORKER" // "wait" or "cancel"
	lifeWorkerAddrEnv = "RMQ_BENCH_LIFE_ADDR"
	lifeWorkerTopic   = "RMQ_BENCH_LIFE_TOPIC"
	lifeWorkerSlots   = "RMQ_BENCH_LIFE_SLOTS"
)

// runLifeWorker is the child's part: a consumer of the topic printing
// "A <id> <unix ns>" as its handler returns (wait) or "R <id>" when its
// handler runs and "E <id> <unix ns>" when its context ended (cancel),
// until its stdin closes.
func runLifeWorker(role string) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "bench life worker:", err); return 2 }
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(lifeWorkerAddrEnv)})
	defer rdb.Close()
	slots, _ := strconv.Atoi(os.Getenv(lifeWorkerSlots))
	t, err := topic.New(os.Getenv(lifeWorkerTopic), topic.FixedTime, slots)
	if err != nil {
		return fail(err)
	}
	c, err := rmq.New(rdb, rmq.WithPrefix(rmqPrefix), rmq.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))))
	if err != nil {
		return fail(err)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
		_ = out.Flush()
	}
	h := func(_ context.Context, msg *consumer.Message) error {
		say("A %s %d", msg.ID, time.Now().UnixNano())
		return nil
	}
	if role == "cancel" {
		h = func(hctx context.Context, msg *consumer.Message) error {
			say("R %s", msg.ID)
			<-hctx.Done()
			say("E %s %d", msg.ID, time.Now().UnixNano())
			return hctx.Err()
		}
	}
	if err := c.Register(t, consumer.ListenerFunc(h), consumer.WithConcurrency(1)); err != nil {
		return fail(err)
	}
	if err := c.Start(context.Background()); err != nil {
		return fail(err)
	}
	say("started")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := closeRMQ(c); err != nil {
		return fail(err)
	}
	return 0
}

// lifeChild is a running child and its lines.
type lifeChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan []string // fields of each line
	read  chan struct{} // closed when stdout ended
}

func (b *runner) startLifeChild(role string, t topic.Topic) (*lifeChild, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), lifeWorkerEnv+"="+role, lifeWorkerAddrEnv+"="+b.admin.Options().Addr,
		lifeWorkerTopic+"="+t.Name(), lifeWorkerSlots+"="+strconv.Itoa(t.SlotAmount()))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch := &lifeChild{cmd: cmd, stdin: stdin, lines: make(chan []string, 16), read: make(chan struct{})}
	go func() {
		defer close(ch.read)
		defer close(ch.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			ch.lines <- strings.Fields(sc.Text())
		}
	}()
	if l, err := ch.next(context.Background()); err != nil || len(l) != 1 || l[0] != "started" {
		_ = ch.stop()
		return nil, fmt.Errorf("life worker did not start: %v %v", l, err)
	}
	return ch, nil
}

// next is the child's next line, as fields.
func (ch *lifeChild) next(ctx context.Context) ([]string, error) {
	select {
	case l, ok := <-ch.lines:
		if !ok {
			return nil, errors.New("life worker exited")
		}
		return l, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(30 * time.Second):
		return nil, errors.New("life worker said nothing for 30 s")
	}
}

// stop closes the child's stdin (it closes its client and exits) and
// waits for it.
func (ch *lifeChild) stop() error {
	_ = ch.stdin.Close()
	for range ch.lines {
	}
	<-ch.read
	return ch.cmd.Wait()
}

// lineTime is the unix-ns time in field 2 of a line of id with tag.
func lineTime(l []string, tag, id string) (time.Time, error) {
	if len(l) != 3 || l[0] != tag || l[1] != id {
		return time.Time{}, fmt.Errorf("life worker said %v, want %s %s", l, tag, id)
	}
	ns, err := strconv.ParseInt(l[2], 10, 64)
	return time.Unix(0, ns), err
}

// lifeWaitProcs is lifeWait with the consumer in a child process: from
// the child's handler returning to the Wait in this process returning.
func (b *runner) lifeWaitProcs(ctx context.Context, log *slog.Logger) ([]time.Duration, error) {
	return b.withLifeChild(log, "wait", "life-wait-procs", func(c *rmq.Client, t topic.Topic, ch *lifeChild) ([]time.Duration, error) {
		return lifeWaitSamples(ctx, b, c, t, ch)
	})
}

// withLifeChild runs f with a client of this process and a child process
// of role consuming the topic named name, and stops both.
func (b *runner) withLifeChild(log *slog.Logger, role, name string, f func(c *rmq.Client, t topic.Topic, ch *lifeChild) ([]time.Duration, error)) (_ []time.Duration, err error) {
	t := topic.MustNew(name, topic.FixedTime, b.o.slots)
	c, err := rmq.New(b.rdb, rmq.WithPrefix(rmqPrefix), rmq.WithLogger(log))
	if err != nil {
		return nil, err
	}
	defer closeRMQ(c)
	ch, err := b.startLifeChild(role, t)
	if err != nil {
		return nil, err
	}
	defer func() {
		if serr := ch.stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	out, err := f(c, t, ch)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, err
}

// lifeWaitSamples measures lifeSamples Waits against ch's handler.
func lifeWaitSamples(ctx context.Context, b *runner, c *rmq.Client, t topic.Topic, ch *lifeChild) ([]time.Duration, error) {
	var out []time.Duration
	for i := range lifeSamples {
		id := fmt.Sprintf("p%d", i)
		d, err := b.waitOne(ctx, c, t, id, func() (time.Time, error) {
			l, err := ch.next(ctx)
			if err != nil {
				return time.Time{}, err
			}
			return lineTime(l, "A", id)
		})
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// lifeCancelProcs is lifeCancel with the handler in a child process: from
// Inspector.Cancel's call in this process to the child's handler's context
// ending.
func (b *runner) lifeCancelProcs(ctx context.Context, log *slog.Logger) ([]time.Duration, error) {
	return b.withLifeChild(log, "cancel", "life-cancel-procs", func(c *rmq.Client, t topic.Topic, ch *lifeChild) ([]time.Duration, error) {
		return lifeCancelSamples(ctx, c, t, ch)
	})
}

// lifeCancelSamples measures lifeSamples Cancels of ch's running handler.
func lifeCancelSamples(ctx context.Context, c *rmq.Client, t topic.Topic, ch *lifeChild) ([]time.Duration, error) {
	var out []time.Duration
	for i := range lifeSamples {
		id := fmt.Sprintf("q%d", i)
		if _, err := c.Producer().SendFixedTime(ctx, t, []byte(id), time.Now(), producer.WithKey(id)); err != nil {
			return nil, err
		}
		l, err := ch.next(ctx)
		if err != nil {
			return nil, err
		}
		if len(l) != 2 || l[0] != "R" || l[1] != id {
			return nil, fmt.Errorf("life worker said %v, want R %s", l, id)
		}
		at := time.Now()
		ok, err := c.Inspector().Cancel(ctx, t, id)
		if err != nil || !ok {
			return nil, fmt.Errorf("cancel %s: %v %v", id, ok, err)
		}
		if l, err = ch.next(ctx); err != nil {
			return nil, err
		}
		ended, err := lineTime(l, "E", id)
		if err != nil {
			return nil, err
		}
		out = append(out, ended.Sub(at))
	}
	return out, nil
}
