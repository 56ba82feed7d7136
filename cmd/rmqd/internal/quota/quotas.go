package quota

import (
	"flag"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/rmq-go/rmq/rmq"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"
)

// Quotas bound what one tenant (a namespace's token) may make rmqd and
// Redis hold or do. lmstfy has none of them; each is a flag, and 0 turns
// it off (the zero value bounds nothing, as the tests' services use).
type Quotas struct {
	// MaxSchedules is the most schedules one namespace may have through
	// rmqd (per pool).
	MaxSchedules int
	// MinScheduleInterval is the shortest time between two ticks of a
	// schedule set through rmqd.
	MinScheduleInterval time.Duration
	// PrivateInfo puts /info (every namespace and queue of a pool) behind
	// the admin accounts; lmstfy serves it to anyone, the default here.
	PrivateInfo bool
	// MaxLongPolls and MaxLongPollsPerToken bound the long polls waiting
	// at once in this process, and per token; MaxWatched and
	// MaxWatchedPerToken the names of queues that do not exist yet that
	// they wait on (../auth/pollcap.go).
	MaxLongPolls, MaxLongPollsPerToken int
	MaxWatched, MaxWatchedPerToken     int
	// MaxQueuesPerToken is the most queues one token may create (its
	// first publish or schedule on a name nobody used).
	MaxQueuesPerToken int
	// MaxBulkMemory bounds the bytes of bulk publish bodies handled at
	// once (../service/bulkbody.go).
	MaxBulkMemory int64
}

// Defaults of the flags.
const (
	defaultMaxQueuesPerToken   = 1000
	defaultMaxBulkMemory       = 128 << 20
	defaultMaxSchedules        = 100
	defaultMinScheduleInterval = time.Minute
)

func (q *Quotas) Flags(fs *flag.FlagSet) {
	fs.IntVar(&q.MaxSchedules, "max-schedules", defaultMaxSchedules, "most schedules one namespace may have (per pool; 0: no bound); beyond: 403")
	fs.BoolVar(&q.PrivateInfo, "private-info", false, "serve /info (every namespace and queue) only behind --admin-account; lmstfy serves it to anyone, the default")
	fs.IntVar(&q.MaxLongPolls, "max-long-polls", defaultMaxLongPolls, "long polls (consumes and job waits with a timeout, event streams) waiting at once in this process (0: no bound); beyond: 429")
	fs.IntVar(&q.MaxLongPollsPerToken, "max-long-polls-per-token", defaultMaxLongPollsPerToken, "long polls waiting at once per token in this process (0: no bound); beyond: 429")
	fs.IntVar(&q.MaxWatched, "max-watched-queues", defaultMaxWatched, "names of queues that do not exist yet that long polls wait on in this process, summed over the polls (0: no bound); beyond: 429")
	fs.IntVar(&q.MaxWatchedPerToken, "max-watched-queues-per-token", defaultMaxWatchedPerToken, "names of queues that do not exist yet that one token's long polls wait on, summed over its polls (0: no bound); beyond: 429")
	fs.IntVar(&q.MaxQueuesPerToken, "max-queues-per-token", defaultMaxQueuesPerToken, "queues one token may create (0: no bound); a publish or schedule that would create one more answers 403")
	fs.Int64Var(&q.MaxBulkMemory, "max-bulk-memory", defaultMaxBulkMemory, "bytes of bulk publish bodies handled at once (up to 64 MiB each; 0: no bound); more wait for their turn")
	fs.DurationVar(&q.MinScheduleInterval, "min-schedule-interval", defaultMinScheduleInterval, "shortest time between two ticks of a schedule (0: no bound); a spec that ticks more often answers 400")
}

// scheduleTicksChecked is how many ticks of a spec are looked at for the
// shortest gap: a cron spec repeats within a year, and a burst of ticks
// close together (0,1 * * * * *) shows in its first ticks.
const scheduleTicksChecked = 64

// CheckInterval returns the 400 text for a spec that ticks more often
// than q allows, or "".
func (q Quotas) CheckInterval(sc rmq.Schedule, now time.Time) string {
	if q.MinScheduleInterval <= 0 {
		return ""
	}
	ticks, err := rmq.NextTicks(sc.Spec, sc.Location, now, scheduleTicksChecked)
	if err != nil {
		return "" // Set answers the spec's error
	}
	for i := 1; i < len(ticks); i++ {
		if ticks[i].Sub(ticks[i-1]) < q.MinScheduleInterval {
			return "invalid spec: ticks less than " + q.MinScheduleInterval.String() + " apart (--min-schedule-interval)"
		}
	}
	return ""
}

// WriteQuota answers 403 for a quota reached.
func WriteQuota(w http.ResponseWriter, what string, max int, flagName string) {
	respond.WriteError(w, http.StatusForbidden, fmt.Sprintf("%s: at most %s (--%s)", what, strconv.Itoa(max), flagName))
}

// Defaults of the flags (0 turns a bound off).
const (
	defaultMaxLongPolls         = 10000
	defaultMaxLongPollsPerToken = 500
	defaultMaxWatched           = 20000
	defaultMaxWatchedPerToken   = 1000
)
