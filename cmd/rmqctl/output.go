package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// The JSON shapes below are the stable output of -o json: field names and
// their meaning do not change; new fields may be added. Times are RFC 3339
// in UTC with milliseconds, absent when unknown; a body comes with its
// encoding ("text" or "base64").

type topicJSON struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Slots    int    `json:"slots"`
	Waiting  int64  `json:"waiting"`
	InFlight int64  `json:"in_flight"`
	Dead     int64  `json:"dead"`
}

type statsJSON struct {
	Topic       string          `json:"topic"`
	Type        string          `json:"type"`
	SlotAmount  int             `json:"slot_amount"`
	Now         string          `json:"now"`
	Waiting     int64           `json:"waiting"`
	Due         int64           `json:"due"`
	InFlight    int64           `json:"in_flight"`
	Dead        int64           `json:"dead"`
	Delayed     int64           `json:"delayed"`
	Paused      bool            `json:"paused"`
	NextDue     string          `json:"next_due,omitempty"`
	LagSeconds  float64         `json:"lag_seconds"`
	TopPriority int64           `json:"top_priority,omitempty"`
	OldestDeath string          `json:"oldest_death,omitempty"`
	NewestDeath string          `json:"newest_death,omitempty"`
	Limits      string          `json:"limits,omitempty"`
	Grouped     int64           `json:"grouped"`
	Groups      int64           `json:"groups"`
	Adaptive    []adaptiveJSON  `json:"adaptive,omitempty"`
	Retained    int64           `json:"retained"`
	Events      int64           `json:"events"`
	Slots       []slotStatsJSON `json:"slots"`
}

type adaptiveJSON struct {
	Client string `json:"client"`
	Limit  int    `json:"limit"`
	Min    int    `json:"min"`
	Max    int    `json:"max"`
}

type slotStatsJSON struct {
	Slot        int    `json:"slot"`
	Waiting     int64  `json:"waiting"`
	Due         int64  `json:"due"`
	InFlight    int64  `json:"in_flight"`
	Dead        int64  `json:"dead"`
	NextDue     string `json:"next_due,omitempty"`
	TopPriority int64  `json:"top_priority,omitempty"`
}

type deadJSON struct {
	ID           string `json:"id"`
	Topic        string `json:"topic"`
	Slot         int    `json:"slot"`
	Attempts     int    `json:"attempts"`
	LastError    string `json:"last_error"`
	FirstSentAt  string `json:"first_sent_at,omitempty"`
	DiedAt       string `json:"died_at"`
	DueAt        string `json:"due_at,omitempty"`
	Priority     int64  `json:"priority,omitempty"`
	Body         string `json:"body"`
	BodyEncoding string `json:"body_encoding"`
	Cursor       string `json:"cursor"`
}

type deadPageJSON struct {
	Messages   []deadJSON `json:"messages"`
	NextCursor string     `json:"next_cursor"` // "" on the last page
}

type waitingJSON struct {
	ID           string  `json:"id"`
	Topic        string  `json:"topic"`
	Slot         int     `json:"slot"`
	Score        float64 `json:"score"`
	DueAt        string  `json:"due_at,omitempty"`
	Priority     int64   `json:"priority,omitempty"`
	Attempts     int     `json:"attempts"`
	LastError    string  `json:"last_error"`
	FirstSentAt  string  `json:"first_sent_at,omitempty"`
	InFlight     bool    `json:"in_flight"`
	Body         string  `json:"body"`
	BodyEncoding string  `json:"body_encoding"`
}

type countJSON struct {
	Topic     string `json:"topic"`
	Requested int    `json:"requested"` // ids named; -1 with --all
	Requeued  *int   `json:"requeued,omitempty"`
	Deleted   *int   `json:"deleted,omitempty"`
}

type removeJSON struct {
	Topic   string `json:"topic"`
	ID      string `json:"id"`
	Removed bool   `json:"removed"`
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes aligned columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// fmtTime is RFC 3339 in UTC with milliseconds; "" for the zero time.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// cellTime is fmtTime with "-" for the zero time, for tables.
func cellTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return fmtTime(t)
}

// printable reports whether a body reads as text: valid UTF-8 of printable
// characters, tabs and line breaks.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) && r != '\n' && r != '\r' && r != '\t' {
			return false
		}
	}
	return true
}

// encodeBody returns a body as text when printable, else in base64.
func encodeBody(b []byte) (body, encoding string) {
	if printable(b) {
		return string(b), "text"
	}
	return base64.StdEncoding.EncodeToString(b), "base64"
}

var cellEscaper = strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", `\t`)

// cell shortens text for a table cell: line breaks and tabs escaped, at
// most n characters.
func cell(s string, n int) string {
	s = cellEscaper.Replace(s)
	if s == "" {
		return "-"
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// bodyCell is a body for a table: text, or "base64:" and its base64.
func bodyCell(b []byte, n int) string {
	body, enc := encodeBody(b)
	if enc == "base64" {
		body = "base64:" + body
	}
	return cell(body, n)
}

func deadToJSON(m rmq.DeadMessage) deadJSON {
	body, enc := encodeBody(m.Body)
	return deadJSON{
		ID: m.ID, Topic: m.Topic, Slot: m.Slot, Attempts: m.Attempts, LastError: m.LastError,
		FirstSentAt: fmtTime(m.FirstSentAt), DiedAt: fmtTime(m.DiedAt), DueAt: fmtTime(m.DueAt),
		Priority: m.Priority, Body: body, BodyEncoding: enc, Cursor: m.Cursor(),
	}
}

func waitingToJSON(m rmq.WaitingMessage) waitingJSON {
	body, enc := encodeBody(m.Body)
	return waitingJSON{
		ID: m.ID, Topic: m.Topic, Slot: m.Slot, Score: m.Score, DueAt: fmtTime(m.DueAt),
		Priority: m.Priority, Attempts: m.Attempts, LastError: m.LastError,
		FirstSentAt: fmtTime(m.FirstSentAt), InFlight: m.InFlight, Body: body, BodyEncoding: enc,
	}
}

func statsToJSON(st rmq.Stats) statsJSON {
	out := statsJSON{
		Topic: st.Topic.Name(), Type: st.Topic.Type().String(), SlotAmount: st.Topic.SlotAmount(),
		Now: fmtTime(st.Now), Waiting: st.Store, Due: st.Due, InFlight: st.Prepare, Dead: st.Dead,
		Delayed: st.Delayed, Paused: st.Paused,
		NextDue: fmtTime(st.NextDue), LagSeconds: st.Lag().Seconds(), TopPriority: st.TopPriority,
		OldestDeath: fmtTime(st.OldestDeath), NewestDeath: fmtTime(st.NewestDeath),
		Limits: st.Limits.String(), Grouped: st.Grouped, Groups: st.Groups,
		Retained: st.Retained, Events: st.Events,
		Slots: []slotStatsJSON{},
	}
	for _, x := range st.Adaptive {
		out.Adaptive = append(out.Adaptive, adaptiveJSON{Client: x.Client, Limit: x.Limit, Min: x.Min, Max: x.Max})
	}
	for _, s := range st.Slots {
		out.Slots = append(out.Slots, slotStatsJSON{
			Slot: s.Slot, Waiting: s.Store, Due: s.Due, InFlight: s.Prepare, Dead: s.Dead,
			NextDue: fmtTime(s.NextDue), TopPriority: s.TopPriority,
		})
	}
	return out
}

func describe(t topic.Topic) string {
	return fmt.Sprintf("%s (%s, %d slots)", t.Name(), t.Type(), t.SlotAmount())
}
