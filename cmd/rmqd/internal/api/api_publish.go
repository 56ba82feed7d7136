package api

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/encode"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/names"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/params"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/respond"

	"github.com/rmq-go/rmq/cmd/rmqd/internal/pull"
	"github.com/rmq-go/rmq/cmd/rmqd/internal/service"
)

// immediateSkew is how far in the past an undelayed job is due (see spec).
const immediateSkew = time.Second

// publishParams are a publish's query and headers, checked.
type publishParams struct {
	typ   topic.Type // 0: the queue's own
	delay time.Duration
	at    time.Time // absolute due time (RMQ extension); zero: now+delay
	ttl   time.Duration
	tries int
	prio  int64
	key   string
	group string // ?group= (../admin/admin_flow.go)
	// uniqueFor is ?unique_for= (0: none): the publish is refused (409)
	// when a unique publish of its id came within that one's window.
	uniqueFor time.Duration
	version   bool // Enable-Job-Version: YES
	attrs     map[string]string
}

// parsePublish checks the query in lmstfy's order (delay, ttl, ttl<delay,
// tries), then rmqd's additions. It returns the 400 text, or "".
func parsePublish(r *http.Request) (publishParams, string) {
	p, bad := parseParams(r.URL.Query())
	p.version = strings.EqualFold(r.Header.Get("Enable-Job-Version"), "yes")
	return p, bad
}

// parseParams is parsePublish's check of the parameters q, which a flow's
// nodes name in JSON (api_flows.go).
func parseParams(q url.Values) (publishParams, string) {
	var p publishParams
	delay, ok := params.QueryUint(q, "delay", 0, params.MaxUint32)
	if !ok {
		return p, "invalid delay"
	}
	p.delay = time.Duration(delay) * time.Second
	// RMQ extensions: millisecond delays and absolute times, one way only.
	if _, has := q["delay_ms"]; has {
		ms, ok := params.QueryUint(q, "delay_ms", 0, params.MaxUint32*1000)
		if !ok || q.Has("delay") {
			return p, "invalid delay"
		}
		p.delay = time.Duration(ms) * time.Millisecond
	}
	if s, has := q["at"]; has {
		if q.Has("delay") || q.Has("delay_ms") {
			return p, "invalid at"
		}
		var bad string
		if p.at, p.delay, bad = params.ParseAt(s[0], time.Now()); bad != "" {
			return p, bad
		}
	}
	ttl, ok := params.QueryUint(q, "ttl", params.DefaultTTL, params.MaxUint32)
	if !ok {
		return p, "invalid ttl"
	}
	if ttl > params.MaxSpan {
		return p, params.ErrTTLTooLong
	}
	p.ttl = time.Duration(ttl) * time.Second
	if p.ttl > 0 && p.ttl < p.delay {
		return p, "ttl is shorter than delay"
	}
	tries, ok := params.QueryUint(q, "tries", params.DefaultTries, params.MaxTries)
	if !ok {
		return p, "invalid tries"
	}
	if tries == 0 {
		return p, "tries shouldn't be zero"
	}
	p.tries = int(tries)

	if s, has := q["type"]; has {
		t, err := topic.ParseType(s[0])
		if err != nil {
			return p, "invalid type"
		}
		p.typ = t
	}
	if q.Has("priority") {
		v, ok := params.QueryUint(q, "priority", 0, 1<<53)
		if !ok || v < topic.MinPriority {
			return p, "invalid priority"
		}
		p.prio = int64(v)
	}
	if s, has := q["key"]; has {
		if !validKey(s[0]) {
			return p, "invalid key"
		}
		p.key = s[0]
	}
	if s, has := q["group"]; has {
		if !names.ValidGroup(s[0]) {
			return p, "invalid group"
		}
		p.group = s[0]
	}
	if bad := p.parseUnique(q); bad != "" {
		return p, bad
	}
	return p, ""
}

// maxUniqueFor is the longest unique_for in seconds (the library's
// producer.MaxUniqueFor).
const maxUniqueFor = uint64(producer.MaxUniqueFor / time.Second)

// parseUnique checks the unique publish parameters: unique_for=N (1 s ..
// 30 days) refuses a repeat of the job's id within N s, whatever became of
// the first job; unique_key=K names that id (the job id, as key=K does;
// without it key= is the id). One without the other's id is refused, so
// a unique publish always names what it is unique by.
func (p *publishParams) parseUnique(q url.Values) string {
	if s, has := q["unique_key"]; has {
		if !validKey(s[0]) || (p.key != "" && p.key != s[0]) {
			return "invalid unique_key"
		}
		p.key = s[0]
	}
	if !q.Has("unique_for") {
		if q.Has("unique_key") {
			return "invalid unique_for: unique_key needs it"
		}
		return ""
	}
	secs, ok := params.QueryUint(q, "unique_for", 0, maxUniqueFor)
	if !ok || secs == 0 {
		return "invalid unique_for: 1 to 2592000 (30 days)"
	}
	if p.key == "" {
		return "invalid unique_for: needs unique_key or key"
	}
	p.uniqueFor = time.Duration(secs) * time.Second
	return ""
}

// validKey: a key is a job id, used in paths: [-_.:A-Za-z0-9]{1,255}.
func validKey(s string) bool {
	if s == "" || len(s) > names.MaxNameLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !names.NameByte(s[i]) && s[i] != '.' && s[i] != ':' {
			return false
		}
	}
	return true
}

// attributes collects Job-Attr-* headers (only with the version header):
// name lower-cased and cut to 32 bytes, value cut to 128, empty values
// skipped, the first value of a repeated header. ok is false for more
// than 16.
func attributes(r *http.Request, version bool) (map[string]string, bool) {
	if !version {
		return nil, true
	}
	attrs := map[string]string{}
	for name, vals := range r.Header {
		rest, found := strings.CutPrefix(strings.ToLower(name), "job-attr-")
		if !found || rest == "" || len(vals) == 0 || vals[0] == "" {
			continue
		}
		if len(rest) > params.MaxAttrName {
			rest = rest[:params.MaxAttrName]
		}
		v := vals[0]
		if len(v) > params.MaxAttrVal {
			v = v[:params.MaxAttrVal]
		}
		attrs[rest] = v
	}
	if len(attrs) > params.MaxAttrs {
		return nil, false
	}
	if len(attrs) == 0 {
		return nil, true
	}
	return attrs, true
}

// newJobID is a ULID, with lmstfy's "1" in front in version mode.
func (p publishParams) newJobID() string {
	if p.key != "" {
		return p.key
	}
	id := ulid.Make().String()
	if p.version {
		return "1" + id
	}
	return id
}

// spec builds the job of one body for a queue of type typ.
func (p publishParams) spec(body []byte, typ topic.Type) pull.JobSpec {
	j := pull.JobSpec{ID: p.newJobID(), Body: body, Tries: p.tries, TTL: p.ttl, Headers: p.attrs, Prio: p.prio, Window: p.delay, Group: p.group,
		UniqueFor: p.uniqueFor}
	switch {
	case !p.at.IsZero():
		j.Due = p.at
	case p.delay == 0:
		// Due a little in the past: Redis's clock decides what is due and
		// may lag this process's (it did by ms here; NTP between hosts by
		// more), and a job published without delay must be consumable at
		// once. All undelayed jobs shift alike, so they keep their order.
		j.Due = time.Now().Add(-immediateSkew)
	default:
		j.Due = time.Now().Add(p.delay)
	}
	if typ == topic.Priority && p.delay > 0 {
		j.NotOn = j.Due
	}
	return j
}

// checkType finishes the checks that need the queue's type.
func (p publishParams) checkType(t topic.Topic) string {
	switch t.Type() {
	case topic.Priority:
		if p.prio == 0 {
			return "invalid priority"
		}
	default:
		if p.prio != 0 {
			return "invalid priority"
		}
	}
	return ""
}

type publishedBody struct {
	Msg   string `json:"msg"`
	JobID string `json:"job_id"`
}

func (s *handlers) publish(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	s.publishOne(w, r, qr)
}

// republish deletes the old job, then publishes like publish. Everything
// that can be checked before is (the parameters, the body, the queue's
// type): a bad request answers 400 and leaves the job as it was. Once the
// request is good the old job goes unconditionally, as in lmstfy.
func (s *handlers) republish(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	p, body, ok := readPublish(w, r)
	if !ok {
		return
	}
	if p.uniqueFor > 0 {
		// A republish deletes the old job first: a refused unique publish
		// would leave neither.
		respond.WriteError(w, http.StatusBadRequest, "invalid unique_for: not on republish")
		return
	}
	t, found, err := qr.Pool.QueueTopic(r.Context(), qr.Ns, qr.Q)
	if err != nil {
		s.WriteInternal(w, r, err)
		return
	}
	if found {
		if p.typ != 0 && p.typ != t.Type() {
			s.LibError(w, r, pull.ErrTypeConflict)
			return
		}
		if bad := p.checkType(t); bad != "" {
			respond.WriteError(w, http.StatusBadRequest, bad)
			return
		}
	}
	if err := qr.Pool.Ack(r.Context(), t, qr.ID, nil); err != nil {
		s.LibError(w, r, err)
		return
	}
	s.publishParsed(w, r, qr, p, body)
}

func (s *handlers) publishOne(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	if p, body, ok := readPublish(w, r); ok {
		s.publishParsed(w, r, qr, p, body)
	}
}

// readPublish reads a publish's parameters, attributes and body; ok false
// means the answer (400, 413) was written.
func readPublish(w http.ResponseWriter, r *http.Request) (p publishParams, body []byte, ok bool) {
	p, bad := parsePublish(r)
	if bad != "" {
		respond.WriteError(w, http.StatusBadRequest, bad)
		return p, nil, false
	}
	body, err := respond.ReadBody(w, r, params.MaxJobSize)
	if err != nil {
		if respond.IsTooLarge(err) {
			respond.WriteError(w, http.StatusRequestEntityTooLarge, "body too large")
			return p, nil, false
		}
		respond.WriteError(w, http.StatusBadRequest, "invalid body")
		return p, nil, false
	}
	attrs, ok := attributes(r, p.version)
	if !ok {
		respond.WriteError(w, http.StatusBadRequest, "too many attributes, cannot exceed 16")
		return p, nil, false
	}
	p.attrs = attrs
	return p, body, true
}

// publishParsed publishes a checked publish's job.
func (s *handlers) publishParsed(w http.ResponseWriter, r *http.Request, qr *service.QueueReq, p publishParams, body []byte) {
	if !s.queueAllowed(w, r, qr) {
		return
	}
	t, err := qr.Pool.PublishTopic(r.Context(), qr.Ns, qr.Q, p.typ)
	if err != nil {
		s.LibError(w, r, err)
		return
	}
	if bad := p.checkType(t); bad != "" {
		respond.WriteError(w, http.StatusBadRequest, bad)
		return
	}
	j := p.spec(body, t.Type())
	if err := qr.Pool.Publish(r.Context(), t, j); err != nil {
		s.LibError(w, r, err)
		return
	}
	qr.Pool.Defined(t)
	s.Metrics.Published.Add(1)
	respond.WriteRawJSON(w, http.StatusCreated, encode.PublishedJSON(j.ID))
}

// bulkKeyError is the 400 text of a bulk publish that names a job id: one
// id for many jobs would merge them (key=), or refuse all but the first
// (unique_key=).
func bulkKeyError(q url.Values) string {
	if q.Has("unique_key") {
		return "invalid unique_key"
	}
	return "invalid key"
}

// maxBulkBody bounds a bulk body: 64 jobs of 1 MiB and their JSON syntax.
const maxBulkBody = params.MaxBulkJobs*(params.MaxJobSize+1) + 4096

// readBulkBody reads a bulk publish's or a flow's body, which counts
// against the bulk bodies in progress (../service/bulkbody.go) from before
// it is read until release is called, once its jobs are stored. ok is
// false when the answer was written (413, 400) or the client went away
// while it waited.
func (s *handlers) readBulkBody(w http.ResponseWriter, r *http.Request) (raw []byte, release func(), ok bool) {
	hold := r.ContentLength
	if hold < 0 || hold > maxBulkBody {
		hold = maxBulkBody
	}
	if err := s.Bodies.Acquire(r.Context(), hold); err != nil {
		return nil, nil, false
	}
	raw, err := respond.ReadBody(w, r, maxBulkBody)
	if err != nil {
		s.Bodies.Release(hold)
		if respond.IsTooLarge(err) {
			respond.WriteError(w, http.StatusRequestEntityTooLarge, "body too large")
		} else {
			respond.WriteError(w, http.StatusBadRequest, "invalid body")
		}
		return nil, nil, false
	}
	return raw, func() { s.Bodies.Release(hold) }, true
}

func (s *handlers) publishBulk(w http.ResponseWriter, r *http.Request, qr *service.QueueReq) {
	p, bad := parsePublish(r)
	if bad == "" && p.key != "" {
		bad = bulkKeyError(r.URL.Query())
	}
	if bad != "" {
		respond.WriteError(w, http.StatusBadRequest, bad)
		return
	}
	raw, release, ok := s.readBulkBody(w, r)
	if !ok {
		return
	}
	defer release()
	elems, err := service.SplitArray(raw)
	if err != nil {
		respond.WriteError(w, http.StatusBadRequest, "request body should be an array of objects")
		return
	}
	switch {
	case len(elems) == 0:
		respond.WriteError(w, http.StatusBadRequest, "no jobs")
		return
	case len(elems) > params.MaxBulkJobs:
		respond.WriteError(w, http.StatusBadRequest, "too many jobs")
		return
	}
	for _, e := range elems {
		if len(e) > params.MaxJobSize {
			respond.WriteError(w, http.StatusRequestEntityTooLarge, "job too large")
			return
		}
	}
	attrs, ok := attributes(r, p.version)
	if !ok {
		respond.WriteError(w, http.StatusBadRequest, "too many attributes, cannot exceed 16")
		return
	}
	p.attrs = attrs
	if !s.queueAllowed(w, r, qr) {
		return
	}
	t, err := qr.Pool.PublishTopic(r.Context(), qr.Ns, qr.Q, p.typ)
	if err != nil {
		s.LibError(w, r, err)
		return
	}
	if bad := p.checkType(t); bad != "" {
		respond.WriteError(w, http.StatusBadRequest, bad)
		return
	}
	jobs := make([]pull.JobSpec, len(elems))
	ids := make([]string, len(elems))
	for i, e := range elems {
		jobs[i] = p.spec(e, t.Type())
		ids[i] = jobs[i].ID
	}
	if err := qr.Pool.PublishBatch(r.Context(), t, jobs); err != nil {
		s.LibError(w, r, err)
		return
	}
	qr.Pool.Defined(t)
	s.Metrics.Published.Add(uint64(len(jobs)))
	respond.WriteJSON(w, http.StatusCreated, struct {
		Msg    string   `json:"msg"`
		JobIDs []string `json:"job_ids"`
	}{"published", ids})
}
