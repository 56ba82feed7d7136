//go:build linux

package zkfleet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/internal/testkit/redistest"
	"github.com/rmq-go/rmq/internal/testkit/zkserver"
	"github.com/rmq-go/rmq/internal/testkit/zkserver/zktest"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// sessionTimeout is the workers' ZooKeeper session timeout: the test
// servers tick every 100 ms and grant at most 2 s.
const sessionTimeout = 2 * time.Second

// fleet is one test's world: a redis-server, a ZooKeeper, a topic and the
// worker processes.
type fleet struct {
	t       *testing.T
	rdb     *redis.Client
	zk      *zkserver.Server
	tp      topic.Topic
	base    workerConfig
	keys    int
	perKey  int
	sent    atomic.Int64
	workers []*worker
	stopAt  time.Time // when stopAll began
}

type worker struct {
	f        *fleet
	name     string
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	loaded   chan struct{}
	out      string
	stderr   *tailBuffer
	member   string
	ready    chan struct{}
	exited   chan struct{}
	closed   atomic.Bool // printed "closed" after SIGTERM
	killedAt time.Time
	stopped  time.Time
	resumed  time.Time
}

func newFleet(t *testing.T, slotAmount, keys, perKey int) *fleet {
	t.Helper()
	srv := redistest.Shared(t)
	rdb := redistest.Client(t, srv)
	zk := zktest.StartConfig(t, zkserver.Config{TickTime: 100 * time.Millisecond})
	prefix := redistest.Prefix(t)
	if len(prefix) > 64 {
		prefix = prefix[:64]
	}
	tp, err := topic.New("orders", topic.FixedTime, slotAmount)
	require.NoError(t, err)
	f := &fleet{
		t: t, rdb: rdb, zk: zk, tp: tp, keys: keys, perKey: perKey,
		base: workerConfig{
			Redis: srv.Addr(), ZK: zk.Addr(), Prefix: prefix, Topic: tp.Name(), Slots: slotAmount,
			SessionTimeout: sessionTimeout, WorkMin: 0, WorkMax: 2 * time.Millisecond, Concurrency: 64,
		},
	}
	dir := t.TempDir()
	f.base.Out = dir
	t.Cleanup(func() {
		for _, w := range f.workers {
			w.kill()
			if t.Failed() {
				t.Logf("worker %s stderr (tail):\n%s", w.name, w.stderr.String())
			}
		}
	})
	return f
}

// start launches a worker process and waits until it joined the fleet.
func (f *fleet) start(name string) *worker {
	f.t.Helper()
	w := f.spawn(name, false)
	w.waitReady()
	return w
}

// prepare launches a deferred worker: ready to join, not joined yet.
func (f *fleet) prepare(name string) *worker {
	f.t.Helper()
	w := f.spawn(name, true)
	select {
	case <-w.loaded:
	case <-w.exited:
		f.t.Fatalf("worker %s exited before loading:\n%s", name, w.stderr.String())
	case <-time.After(60 * time.Second):
		f.t.Fatalf("worker %s did not load within 60 s:\n%s", name, w.stderr.String())
	}
	return w
}

// join lets a deferred worker join the fleet and waits until it did.
func (w *worker) join() {
	w.f.t.Helper()
	_, err := io.WriteString(w.stdin, "join\n")
	require.NoError(w.f.t, err)
	w.waitReady()
}

func (w *worker) waitReady() {
	w.f.t.Helper()
	select {
	case <-w.ready:
	case <-w.exited:
		w.f.t.Fatalf("worker %s exited before joining:\n%s", w.name, w.stderr.String())
	case <-time.After(60 * time.Second):
		w.f.t.Fatalf("worker %s did not join within 60 s:\n%s", w.name, w.stderr.String())
	}
}

func (f *fleet) spawn(name string, deferred bool) *worker {
	f.t.Helper()
	cfg := f.base
	cfg.Name = name
	cfg.Deferred = deferred
	cfg.Out = filepath.Join(f.base.Out, name+".rec")
	raw, err := json.Marshal(cfg)
	require.NoError(f.t, err)
	exe, err := os.Executable()
	require.NoError(f.t, err)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), workerEnv+"="+string(raw))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	w := &worker{f: f, name: name, cmd: cmd, out: cfg.Out, stderr: &tailBuffer{max: 64 << 10},
		ready: make(chan struct{}), loaded: make(chan struct{}), exited: make(chan struct{})}
	cmd.Stderr = w.stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(f.t, err)
	w.stdin, err = cmd.StdinPipe()
	require.NoError(f.t, err)
	require.NoError(f.t, cmd.Start())
	f.workers = append(f.workers, w)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "loaded":
				close(w.loaded)
			case strings.HasPrefix(line, "ready "):
				w.member = strings.TrimPrefix(line, "ready ")
				close(w.ready)
			case line == "closed":
				w.closed.Store(true)
			}
		}
		_ = cmd.Wait()
		close(w.exited)
	}()
	return w
}

func (w *worker) signal(sig syscall.Signal) {
	w.f.t.Helper()
	require.NoError(w.f.t, w.cmd.Process.Signal(sig), "signal %v to %s", sig, w.name)
}

// kill9 kills the worker with SIGKILL and waits until it is gone. The kill
// time is taken once it is gone: everything it recorded started before.
func (w *worker) kill9() {
	w.signal(syscall.SIGKILL)
	<-w.exited
	w.killedAt = time.Now()
}

// freeze stops the worker with SIGSTOP for d, then continues it. The stop
// time is taken once the kernel shows the process stopped, so every record
// it made before the freeze is older.
func (w *worker) freeze(d time.Duration) {
	w.signal(syscall.SIGSTOP)
	stat := fmt.Sprintf("/proc/%d/stat", w.cmd.Process.Pid)
	// The kernel tells no one that a process stopped: /proc is polled.
	redistest.Poll(w.f.t, func() error {
		b, err := os.ReadFile(stat)
		require.NoError(w.f.t, err)
		// pid (comm) state ...: comm may hold spaces, the state follows ") ".
		if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && b[i+2] == 'T' {
			return nil
		}
		return fmt.Errorf("worker %s did not stop", w.name)
	})
	w.stopped = time.Now()
	time.Sleep(d) // the freeze itself: how long is the behaviour under test
	w.resumed = time.Now()
	w.signal(syscall.SIGCONT)
}

func (w *worker) kill() {
	select {
	case <-w.exited:
	default:
		_ = w.cmd.Process.Signal(syscall.SIGCONT)
		_ = w.cmd.Process.Kill()
		<-w.exited
	}
}

// disrupted is when the worker was killed or frozen (zero if never).
func (w *worker) disrupted() time.Time {
	if !w.killedAt.IsZero() {
		return w.killedAt
	}
	return w.stopped
}

// produce sends keys*perKey messages in the background: every key's
// messages in sequence order (one sender per key at a time), due now, slot
// chosen by the key. The returned channel reports the end.
func (f *fleet) produce(ctx context.Context) <-chan error {
	pc, err := rmq.New(f.rdb, rmq.WithPrefix(f.base.Prefix))
	if err != nil {
		done := make(chan error, 1)
		done <- err
		return done
	}
	p := pc.Producer()
	const senders = 8
	done := make(chan error, 1)
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 1; seq <= f.perKey; seq++ {
				for k := g; k < f.keys; k += senders {
					key := keyName(k)
					_, err := p.SendFixedTime(ctx, f.tp, []byte(key), time.Now(),
						producer.WithKey(msgID(key, seq)), producer.WithSlotBasis([]byte(key)))
					if err != nil {
						errs <- fmt.Errorf("send %s: %w", msgID(key, seq), err)
						return
					}
					f.sent.Add(1)
				}
			}
		}()
	}
	go func() {
		wg.Wait()
		close(errs)
		done <- <-errs
	}()
	return done
}

func keyName(k int) string             { return fmt.Sprintf("k%03d", k) }
func msgID(key string, seq int) string { return fmt.Sprintf("%s-%05d", key, seq) }

func parseID(id string) (key string, seq int) {
	key, s, _ := strings.Cut(id, "-")
	seq, _ = strconv.Atoi(s)
	return key, seq
}

func (f *fleet) total() int64 { return int64(f.keys * f.perKey) }

// pending counts the messages in store or prepare over every slot.
func (f *fleet) pending() (int64, error) {
	ctx := context.Background()
	pipe := f.rdb.Pipeline()
	var cmds []*redis.IntCmd
	for i := 0; i < f.tp.SlotAmount(); i++ {
		k := keyspace.KeysFor(f.base.Prefix, f.tp, i)
		cmds = append(cmds, pipe.ZCard(ctx, k.Store), pipe.ZCard(ctx, k.Prepare))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, nil
}

// waitProgress waits until a fraction of all messages was consumed.
func (f *fleet) waitProgress(frac float64, within time.Duration) {
	f.t.Helper()
	redistest.PollWithin(f.t, within, func() error {
		p, err := f.pending()
		require.NoError(f.t, err)
		if done := f.sent.Load() - p; float64(done) < frac*float64(f.total()) {
			return fmt.Errorf("only %d of %d consumed (%d pending)", done, f.total(), p)
		}
		return nil
	})
}

// waitDrained waits until everything was sent and nothing is pending.
func (f *fleet) waitDrained(sending <-chan error, within time.Duration) {
	f.t.Helper()
	select {
	case err := <-sending:
		require.NoError(f.t, err)
	case <-time.After(within):
		f.t.Fatalf("sending did not finish within %v", within)
	}
	f.waitProgress(1, within)
}

// waitBalanced waits until every live worker reports a fair share.
func (f *fleet) waitBalanced(n int) {
	f.t.Helper()
	require.Eventually(f.t, func() bool {
		last := f.records().lastOwned()
		total := 0
		for _, w := range f.workers {
			if w.killedAt.IsZero() {
				k := last[w.name]
				if k != f.tp.SlotAmount()/n && k != (f.tp.SlotAmount()+n-1)/n {
					return false
				}
				total += k
			}
		}
		return total == f.tp.SlotAmount()
	}, 60*time.Second, 50*time.Millisecond, "the fleet did not balance")
}

// waitBusy waits until the worker has at least n handlers running (starts
// without an end in its record file), so a kill or a freeze cuts handlers
// off mid-way.
func (w *worker) waitBusy(n int, within time.Duration) {
	w.f.t.Helper()
	// The worker is another process writing a file: the kernel tells of
	// each write (inotify), at once, as the caller needs, since handlers
	// run for a few ms and it means to catch them running. The watch is
	// set before the file is read, so no write goes unseen.
	writes := watchWrites(w.f.t, w.out)
	defer writes.Close()
	file, err := os.Open(w.out)
	require.NoError(w.f.t, err)
	defer file.Close()
	r := bufio.NewReader(file)
	open, partial := 0, ""
	deadline := time.Now().Add(within)
	events := make([]byte, 4096)
	for {
		line, err := r.ReadString('\n')
		if err != nil { // at the end (possibly mid-line): wait for more
			partial += line
			require.NoError(w.f.t, writes.SetReadDeadline(deadline))
			_, err := writes.Read(events)
			require.NoError(w.f.t, err, "worker %s never had %d handlers running", w.name, n)
			continue
		}
		line, partial = partial+line, ""
		switch line[0] {
		case 'S':
			open++
		case 'E':
			open--
		}
		if open >= n {
			return
		}
	}
}

// watchWrites is an inotify instance told of every write to path, for a
// read with a deadline: each read returns once the file was written to
// since the last.
func watchWrites(t *testing.T, path string) *os.File {
	t.Helper()
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	require.NoError(t, err)
	// Non-blocking, so os.NewFile puts it on the runtime's poller, where
	// reads take deadlines.
	f := os.NewFile(uintptr(fd), "inotify")
	_, err = syscall.InotifyAddWatch(fd, path, syscall.IN_MODIFY)
	if err != nil {
		f.Close()
		require.NoError(t, err)
	}
	return f
}

// stopAll ends every live worker with SIGTERM (a graceful Close).
func (f *fleet) stopAll() {
	f.t.Helper()
	f.stopAt = time.Now()
	for _, w := range f.workers {
		select {
		case <-w.exited:
			continue
		default:
		}
		w.signal(syscall.SIGTERM)
	}
	for _, w := range f.workers {
		select {
		case <-w.exited:
		case <-time.After(30 * time.Second):
			f.t.Fatalf("worker %s did not exit after SIGTERM", w.name)
		}
		if w.killedAt.IsZero() {
			require.True(f.t, w.closed.Load(), "worker %s did not close cleanly:\n%s", w.name, w.stderr.String())
		}
	}
}

// ---- records and checks --------------------------------------------------

type handling struct {
	worker   string
	slot     int
	id, key  string
	seq      int
	epoch    int64
	attempt  int
	start    int64 // unix ns
	end      int64 // 0: never ended (killed)
	cause    string
	interrup bool // the last handling of its slot by a worker when it was killed or frozen
}

type refusal struct {
	worker string
	slot   int
	op     string
	at     int64
}

type ownership struct {
	worker string
	at     int64
	n      int
}

type outcome struct {
	worker, outcome string
	at              int64
}

type records struct {
	hs       []*handling
	refusals []refusal
	owned    map[string][]ownership
	outcomes map[string]int       // worker/outcome -> count
	byID     map[string][]outcome // deliveries that did not end with an ack

	frozenAtStart int
	stopAt        time.Time
}

func (f *fleet) records() *records {
	f.t.Helper()
	r := &records{owned: map[string][]ownership{}, outcomes: map[string]int{}, byID: map[string][]outcome{}, stopAt: f.stopAt}
	for _, w := range f.workers {
		b, err := os.ReadFile(w.out)
		require.NoError(f.t, err)
		open := map[string][]*handling{}
		for _, line := range strings.Split(string(b), "\n") {
			fs := strings.Fields(line)
			if len(fs) == 0 {
				continue
			}
			num := func(i int) int64 {
				n, err := strconv.ParseInt(fs[i], 10, 64)
				require.NoError(f.t, err, "record %q", line)
				return n
			}
			switch fs[0] {
			case "S":
				h := &handling{worker: fs[1], slot: int(num(2)), id: fs[3], epoch: num(4), attempt: int(num(5)), start: num(6)}
				h.key, h.seq = parseID(h.id)
				r.hs = append(r.hs, h)
				open[h.id] = append(open[h.id], h)
			case "E":
				q := open[fs[3]]
				require.NotEmpty(f.t, q, "end without start: %q", line)
				q[0].end, q[0].cause = num(5), fs[6]
				open[fs[3]] = q[1:]
			case "X":
				r.refusals = append(r.refusals, refusal{worker: fs[1], slot: int(num(2)), op: fs[3], at: num(4)})
			case "R":
				r.outcomes[fs[1]+"/"+fs[4]]++
				r.byID[fs[3]] = append(r.byID[fs[3]], outcome{worker: fs[1], outcome: fs[4], at: num(5)})
			case "O":
				r.owned[fs[1]] = append(r.owned[fs[1]], ownership{worker: fs[1], at: num(2), n: int(num(3))})
			}
		}
		// Mark each slot's last handling before the worker was disrupted.
		if at := w.disrupted(); !at.IsZero() {
			last := map[int]*handling{}
			for _, h := range r.hs {
				if h.worker == w.name && h.start < at.UnixNano() {
					if l := last[h.slot]; l == nil || h.start > l.start {
						last[h.slot] = h
					}
				}
			}
			for _, h := range last {
				h.interrup = true
			}
			// A handler call that the worker had already committed to
			// when it was frozen (it checked its ownership, then froze
			// before its first instruction) records its start after
			// SIGCONT, under the epoch it held before: frozen at its start.
			if !w.resumed.IsZero() {
				for _, h := range r.hs {
					l := last[h.slot]
					if h.worker == w.name && l != nil && h.epoch == l.epoch && h.start >= w.resumed.UnixNano() &&
						h.start < w.resumed.Add(frozenStartWindow).UnixNano() {
						h.interrup = true
						r.frozenAtStart++
					}
				}
			}
		}
	}
	return r
}

// frozenStartWindow bounds how long after SIGCONT a handler frozen at its
// start may record that start.
const frozenStartWindow = 50 * time.Millisecond

type report struct {
	handlings    int
	repeats      int // handlings of a message already handled (interrupted ones only)
	overlaps     int // handlings that overlapped the slot's next owner's (frozen ones only)
	maxEpochs    int // most owner epochs one slot saw
	refusedAfter int // Redis refusals of a frozen worker after it resumed
}

// check verifies the fleet invariants over the records and returns figures.
func (f *fleet) check(r *records) report {
	f.t.Helper()
	t := f.t
	rep := report{handlings: len(r.hs)}
	endOf := func(h *handling) int64 {
		if h.end != 0 {
			return h.end
		}
		for _, w := range f.workers {
			if w.name == h.worker && !w.killedAt.IsZero() {
				return w.killedAt.UnixNano()
			}
		}
		return 1<<63 - 1
	}
	byStart := func(hs []*handling) {
		sort.Slice(hs, func(i, j int) bool { return hs[i].start < hs[j].start })
	}

	// Per key: in sequence order, one at a time, nothing lost; a message is
	// handled again only after an interrupted handling.
	byKey := map[string][]*handling{}
	for _, h := range r.hs {
		byKey[h.key] = append(byKey[h.key], h)
	}
	require.Len(t, byKey, f.keys, "every key was handled")
	violations := 0
	for key, hs := range byKey {
		byStart(hs)
		next := 1
		interrupted := map[int]bool{} // seq -> an earlier handling was interrupted
		for i, h := range hs {
			switch {
			case h.seq == next:
				next++
			case h.seq < next:
				if !interrupted[h.seq] {
					violations++
					t.Errorf("key %s: %s handled again by %s (epoch %d) though no earlier handling was interrupted", key, h.id, h.worker, h.epoch)
				}
				rep.repeats++
			default:
				violations++
				t.Errorf("key %s: %s handled by %s while seq %d was not yet handled", key, h.id, h.worker, next)
			}
			interrupted[h.seq] = interrupted[h.seq] || h.interrup
			if i > 0 {
				p := hs[i-1]
				if h.start < endOf(p) && !p.interrup {
					violations++
					t.Errorf("key %s: %s (by %s) started while %s (by %s) still ran", key, h.id, h.worker, p.id, p.worker)
				}
			}
			if violations > 20 {
				t.FailNow()
			}
		}
		if next != f.perKey+1 {
			t.Errorf("key %s: messages from seq %d on were never handled", key, next)
		}
	}

	// Per slot: owners follow each other; epochs never go back; a worker
	// starts handling a slot only after the previous owner's handling
	// ended, except a frozen worker's handling that was cut off mid-way.
	bySlot := map[int][]*handling{}
	for _, h := range r.hs {
		bySlot[h.slot] = append(bySlot[h.slot], h)
	}
	for slot, hs := range bySlot {
		byStart(hs)
		epochs := map[int64]bool{}
		for i, h := range hs {
			epochs[h.epoch] = true
			if i == 0 {
				continue
			}
			p := hs[i-1]
			if h.epoch < p.epoch {
				t.Errorf("slot %d: epoch went back from %d (%s) to %d (%s)", slot, p.epoch, p.worker, h.epoch, h.worker)
			}
			if h.start < endOf(p) {
				if p.interrup && p.worker != h.worker {
					rep.overlaps++
					continue
				}
				t.Errorf("slot %d: %s (by %s, epoch %d) started while %s (by %s, epoch %d) still ran: double ownership",
					slot, h.id, h.worker, h.epoch, p.id, p.worker, p.epoch)
			}
		}
		rep.maxEpochs = max(rep.maxEpochs, len(epochs))
	}

	for _, w := range f.workers {
		if w.resumed.IsZero() {
			continue
		}
		for _, x := range r.refusals {
			if x.worker == w.name && x.at >= w.resumed.UnixNano() {
				rep.refusedAfter++
			}
		}
	}
	p, err := f.pending()
	require.NoError(t, err)
	require.Zero(t, p, "nothing left in store or prepare")
	return rep
}

// lastOwned returns each worker's last ownership snapshot before the
// workers were told to stop (the first to stop hands its slots over).
func (r *records) lastOwned() map[string]int {
	out := map[string]int{}
	for w, os := range r.owned {
		for _, o := range os {
			if r.stopAt.IsZero() || o.at < r.stopAt.UnixNano() {
				out[w] = o.n
			}
		}
	}
	return out
}

// ownedSince returns a worker's last ownership snapshot taken after since,
// -1 if there is none.
func (r *records) ownedSince(worker string, since time.Time) int {
	n := -1
	for _, o := range r.owned[worker] {
		if o.at > since.UnixNano() {
			n = o.n
		}
	}
	return n
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.Write(p)
	if over := t.b.Len() - t.max; over > 0 {
		t.b.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}
