package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// counters are shared by every connection of the measured client.
type counters struct {
	in, out atomic.Int64 // bytes read from / written to Redis
	cmds    atomic.Int64 // commands the client sent
	trips   atomic.Int64 // requests: one per command or pipeline
}

// countingConn counts the bytes that cross a connection.
type countingConn struct {
	net.Conn
	c *counters
}

func (cc countingConn) Read(b []byte) (int, error) {
	n, err := cc.Conn.Read(b)
	cc.c.in.Add(int64(n))
	return n, err
}

func (cc countingConn) Write(b []byte) (int, error) {
	n, err := cc.Conn.Write(b)
	cc.c.out.Add(int64(n))
	return n, err
}

// SyscallConn exposes the socket as the unwrapped connection does, so
// go-redis runs its usual health check on each pool Get (a MSG_PEEK read).
func (cc countingConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := cc.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

func countingDialer(c *counters) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 5 * time.Minute}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: conn, c: c}, nil
	}
}

// countingHook counts commands and round trips (a pipeline is one).
type countingHook struct{ c *counters }

func (h countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.c.cmds.Add(1)
		h.c.trips.Add(1)
		return next(ctx, cmd)
	}
}

func (h countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.c.cmds.Add(int64(len(cmds)))
		h.c.trips.Add(1)
		return next(ctx, cmds)
	}
}

// snapshot is what the meter reads at both ends of a timed section.
type snapshot struct {
	wall        time.Time
	clientCPU   time.Duration // this process, user + system
	redisCPU    float64       // redis-server, user + system seconds
	redisCalls  int64         // INFO commandstats: every command, those run by scripts included
	scriptCalls int64         // of them EVAL/EVALSHA/FCALL
	in, out     int64
	cmds, trips int64
	perCmd      map[string]cmdStat
}

// cmdStat is one line of INFO commandstats.
type cmdStat struct{ calls, usec int64 }

// meter measures one timed section: wall time and the per-message costs.
// It reads Redis through its own client, which is not counted.
type meter struct {
	ctx   context.Context
	admin *redis.Client
	c     *counters
	a, b  snapshot
	// profile, if set, is where the CPU profile of the timed section goes.
	profile string
	pf      *os.File
	// pid, if set, is the client: a process of its own (BullMQ's node),
	// whose CPU, socket bytes and write calls /proc gives.
	pid int
}

func (m *meter) snap() snapshot {
	s := snapshot{
		clientCPU: processCPU(),
		in:        m.c.in.Load(), out: m.c.out.Load(),
		cmds: m.c.cmds.Load(), trips: m.c.trips.Load(),
		perCmd: map[string]cmdStat{},
	}
	if m.pid != 0 {
		s.clientCPU, _ = procCPU(m.pid)
		s.in, s.out, s.trips = procIO(m.pid)
	}
	if info, err := m.admin.Info(m.ctx, "cpu", "commandstats").Result(); err == nil {
		for _, line := range strings.Split(info, "\n") {
			line = strings.TrimSpace(line)
			if v, ok := strings.CutPrefix(line, "used_cpu_sys:"); ok {
				f, _ := strconv.ParseFloat(v, 64)
				s.redisCPU += f
			} else if v, ok := strings.CutPrefix(line, "used_cpu_user:"); ok {
				f, _ := strconv.ParseFloat(v, 64)
				s.redisCPU += f
			} else if rest, ok := strings.CutPrefix(line, "cmdstat_"); ok {
				name, stats, _ := strings.Cut(rest, ":")
				calls := statField(stats, "calls")
				s.perCmd[name] = cmdStat{calls, statField(stats, "usec")}
				s.redisCalls += calls
				switch name {
				case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
					s.scriptCalls += calls
				}
			}
		}
	}
	s.wall = time.Now()
	return s
}

func statField(stats, name string) int64 {
	for _, kv := range strings.Split(stats, ",") {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

func (m *meter) start() {
	if m.profile != "" {
		f, err := os.Create(m.profile)
		if err == nil {
			if err = pprof.StartCPUProfile(f); err != nil {
				f.Close()
			} else {
				m.pf = f
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: cpu profile:", err)
		}
	}
	m.a = m.snap()
}

func (m *meter) stop() {
	m.b = m.snap()
	if m.pf != nil {
		pprof.StopCPUProfile()
		m.pf.Close()
		m.pf = nil
	}
}

// costs is one timed section, per message.
type costs struct {
	rate        float64 // messages per second
	redisCmds   float64 // Redis commands per message, in scripts included
	scriptCalls float64
	trips       float64               // client requests per message (a pipeline is one)
	wireBytes   float64               // bytes both ways per message
	clientCPUus float64               // µs of this process's CPU per message
	redisCPUus  float64               // µs of redis-server CPU per message
	perCmd      map[string][2]float64 // command -> calls, µs per message
}

func (m *meter) costs(n int) costs {
	f := float64(n)
	a, b := m.a, m.b
	per := map[string][2]float64{}
	for name, st := range b.perCmd {
		d := cmdStat{st.calls - a.perCmd[name].calls, st.usec - a.perCmd[name].usec}
		if name == "info" {
			d.calls-- // the meter's own
		}
		if d.calls > 0 {
			per[name] = [2]float64{float64(d.calls) / f, float64(d.usec) / f}
		}
	}
	return costs{
		perCmd:      per,
		rate:        f / b.wall.Sub(a.wall).Seconds(),
		redisCmds:   float64(b.redisCalls-a.redisCalls-1) / f, // minus the meter's own INFO
		scriptCalls: float64(b.scriptCalls-a.scriptCalls) / f,
		trips:       float64(b.trips-a.trips) / f,
		wireBytes:   float64(b.in-a.in+b.out-a.out) / f,
		clientCPUus: float64((b.clientCPU - a.clientCPU).Microseconds()) / f,
		redisCPUus:  (b.redisCPU - a.redisCPU) * 1e6 / f,
	}
}
