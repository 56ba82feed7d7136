package history

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The worker records: a hash per started client, expiring WorkerTTL after
// its last heartbeat, and one sorted set indexing them by that expiry, so
// a reader lists the fleet with one ZRANGEBYSCORE instead of scanning the
// keyspace. The reader prunes the entries whose time passed (a killed
// process's); Close deletes both at once.

// WorkersKey is the sorted set of worker ids by when their record expires
// (Unix ms).
func WorkersKey(prefix string) string { return prefix + ":workers" }

// WorkerKey is the hash of worker id.
func WorkerKey(prefix, id string) string { return prefix + ":worker:" + id }

// Worker is what a started client says of itself.
type Worker struct {
	ID, Host, Version string
	PID               int
	Started           time.Time
	// State returns the client's topics and the sum of their concurrency
	// at each heartbeat (a client's pulled topics grow as it runs).
	State func() (topics []string, concurrency int)
}

// NewWorker returns the record of this process, started now.
func NewWorker(state func() ([]string, int)) *Worker {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	pid := os.Getpid()
	return &Worker{
		ID:   host + ":" + strconv.Itoa(pid) + ":" + hex.EncodeToString(b[:]),
		Host: host, PID: pid, Version: Version(), Started: time.Now(), State: state,
	}
}

// Version is the version of the rmq module linked into this program
// ("(devel)" when built from its own tree).
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if bi.Main.Path == "github.com/rmq-go/rmq" {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == "github.com/rmq-go/rmq" {
			if d.Replace != nil && d.Replace.Version != "" {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return "unknown"
}

// StartWorker makes the recorder keep w's record, from now until Close.
func (r *Recorder) StartWorker(w *Worker) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.worker = w
	r.startLocked()
	r.mu.Unlock()
	r.Flush()
}

// WorkerID returns the id of the recorder's worker record, "" before
// StartWorker.
func (r *Recorder) WorkerID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.worker == nil {
		return ""
	}
	return r.worker.ID
}

func (w *Worker) beat(ctx context.Context, pipe redis.Pipeliner, prefix string, ttl time.Duration, inFlight int) {
	topics, conc := w.State()
	sort.Strings(topics)
	tj, _ := json.Marshal(topics)
	now := time.Now()
	key := WorkerKey(prefix, w.ID)
	pipe.HSet(ctx, key, "id", w.ID, "host", w.Host, "pid", w.PID, "version", w.Version,
		"topics", tj, "concurrency", conc, "inflight", inFlight,
		"started", w.Started.UnixMilli(), "seen", now.UnixMilli())
	pipe.PExpire(ctx, key, ttl)
	pipe.ZAdd(ctx, WorkersKey(prefix), redis.Z{Score: float64(now.Add(ttl).UnixMilli()), Member: w.ID})
}

func (w *Worker) remove(ctx context.Context, pipe redis.Pipeliner, prefix string) {
	pipe.Unlink(ctx, WorkerKey(prefix, w.ID))
	pipe.ZRem(ctx, WorkersKey(prefix), w.ID)
}

// WorkerInfo is a worker record as read back.
type WorkerInfo struct {
	ID, Host              string
	PID                   int
	Started, Seen         time.Time
	Topics                []string
	Concurrency, InFlight int
	Version               string
}

// Workers lists the live worker records under prefix, by id, and prunes
// the index of the expired ones: a ZRANGEBYSCORE and a ZREMRANGEBYSCORE in
// one round trip, then the records' HGETALLs in another.
func Workers(ctx context.Context, rdb redis.UniversalClient, prefix string) ([]WorkerInfo, error) {
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	pipe := rdb.Pipeline()
	ids := pipe.ZRangeArgs(ctx, redis.ZRangeArgs{Key: WorkersKey(prefix), Start: "(" + now, Stop: "+inf", ByScore: true})
	pipe.ZRemRangeByScore(ctx, WorkersKey(prefix), "-inf", now)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	if len(ids.Val()) == 0 {
		return nil, nil
	}
	pipe = rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids.Val()))
	for i, id := range ids.Val() {
		cmds[i] = pipe.HGetAll(ctx, WorkerKey(prefix, id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	out := make([]WorkerInfo, 0, len(cmds))
	for _, c := range cmds {
		h := c.Val()
		if h["id"] == "" {
			continue // expired between the two round trips
		}
		w := WorkerInfo{ID: h["id"], Host: h["host"], Version: h["version"]}
		w.PID, _ = strconv.Atoi(h["pid"])
		w.Concurrency, _ = strconv.Atoi(h["concurrency"])
		w.InFlight, _ = strconv.Atoi(h["inflight"])
		w.Started = msTime(h["started"])
		w.Seen = msTime(h["seen"])
		_ = json.Unmarshal([]byte(h["topics"]), &w.Topics)
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func msTime(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n)
}
