package schedule

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/rmq-go/rmq/internal/keyspace"
	"github.com/rmq-go/rmq/topic"
)

// Redis layout. A schedule lives in the topic slot its name picks
// (keyspace.IndexString(name, slot amount)), next to its pending tick, so that
// one schedule.lua call changes both; those keys carry the slot's hash tag.
// The registry (name -> topic and generation) and the events channel are
// one per prefix.

// HeaderName is the header every tick carries, its value the schedule's
// name, so a listener (or a metrics observer) tells ticks from other
// messages.
const HeaderName = "rmq-schedule"

// RegistryKey is the HASH name -> Registration of every schedule under prefix.
func RegistryKey(prefix string) string { return prefix + ":schedules" }

// EventsChannel is the channel schedule.lua tells schedulers on about the
// earliest pending tick of a slot after every change there.
func EventsChannel(prefix string) string { return prefix + ":schedules:events" }

// SlotOf is the topic slot of the schedule name on t.
func SlotOf(name string, t topic.Topic) int { return keyspace.IndexString(name, t.SlotAmount()) }

// Keys are the KEYS of a schedule.lua call, in order.
type Keys struct {
	Due, State, Def, Msg string
	Slot                 keyspace.Keys
}

// KeysOf returns the schedule keys of slot index of t.
func KeysOf(prefix string, t topic.Topic, index int) Keys {
	base := prefix + ":" + keyspace.Tag(t.Name(), index) + ":"
	return Keys{Due: base + "sched:due", State: base + "sched:state", Def: base + "sched:def", Msg: base + "sched:msg", Slot: keyspace.KeysFor(prefix, t, index)}
}

func (k Keys) list() []string {
	return []string{k.Due, k.State, k.Def, k.Msg, k.Slot.Store, k.Slot.Prepare, k.Slot.Msg, k.Slot.Wake, k.Slot.Delayed}
}

// Registration is a registry entry: where a schedule lives and which Set
// made it.
type Registration struct {
	Topic topic.Topic
	Gen   string
}

func (r Registration) encode() string {
	return r.Topic.Name() + "\t" + r.Topic.Definition() + "\t" + r.Gen
}

func decodeRegistration(s string) (Registration, error) {
	parts := strings.Split(s, "\t")
	if len(parts) != 3 {
		return Registration{}, fmt.Errorf("rmq: malformed schedule registration %q", s)
	}
	t, err := topic.ParseDefinition(parts[0], parts[1])
	if err != nil {
		return Registration{}, err
	}
	return Registration{Topic: t, Gen: parts[2]}, nil
}

// eventPrefix names a slot in the events: topic name, definition, index.
func eventPrefix(t topic.Topic, index int) string {
	return t.Name() + "\t" + t.Definition() + "\t" + strconv.Itoa(index)
}

// event is one message on the events channel.
type event struct {
	topic topic.Topic
	index int
	head  int64 // earliest pending tick (ms), 0 when none
}

func parseEvent(s string) (event, error) {
	parts := strings.Split(s, "\t")
	if len(parts) != 4 {
		return event{}, fmt.Errorf("malformed schedule event %q", s)
	}
	t, err := topic.ParseDefinition(parts[0], parts[1])
	if err != nil {
		return event{}, err
	}
	idx, err := strconv.Atoi(parts[2])
	if err != nil || idx < 0 || idx >= t.SlotAmount() {
		return event{}, fmt.Errorf("malformed schedule event %q", s)
	}
	var head int64
	if parts[3] != "" {
		h, err := strconv.ParseFloat(parts[3], 64)
		if err != nil {
			return event{}, fmt.Errorf("malformed schedule event %q", s)
		}
		head = int64(h)
	}
	return event{topic: t, index: idx, head: head}, nil
}

// State is what schedule.lua keeps of a schedule between ticks.
type State struct {
	Next    int64 // pending tick (ms); 0 while paused
	Last    int64 // latest tick (or trigger) that fired (ms); 0: none yet
	Fired   int64
	Skipped int64
	Ver     int64 // changes with every roll and change of the schedule
	Paused  bool
	Gen     string
}

func parseState(s string) (State, error) {
	f := strings.Split(s, ";")
	if len(f) != 7 {
		return State{}, fmt.Errorf("rmq: malformed schedule state %q", s)
	}
	var st State
	nums := []*int64{&st.Next, &st.Last, &st.Fired, &st.Skipped, &st.Ver}
	for i, p := range nums {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return State{}, fmt.Errorf("rmq: malformed schedule state %q", s)
		}
		*p = int64(v)
	}
	st.Paused = f[5] == "1"
	st.Gen = f[6]
	return st, nil
}

// Message is what each tick sends, as the message HASH packs it.
type Message struct {
	Type     topic.Type
	Priority int64
	TTLMs    int64
	Options  []byte // the envelope's options block (internal/scripts)
	Body     []byte
}

func (m Message) encode() []byte {
	b := make([]byte, 0, 1+7+6+2+len(m.Options)+len(m.Body))
	b = append(b, byte(m.Type))
	b = appendUint(b, uint64(m.Priority), 7)
	b = appendUint(b, uint64(m.TTLMs), 6)
	b = binary.BigEndian.AppendUint16(b, uint16(len(m.Options)))
	b = append(b, m.Options...)
	return append(b, m.Body...)
}

func appendUint(b []byte, v uint64, n int) []byte {
	for i := n - 1; i >= 0; i-- {
		b = append(b, byte(v>>(8*i)))
	}
	return b
}

var errBadMessage = errors.New("rmq: malformed schedule message record")

func decodeMessage(b []byte) (Message, error) {
	if len(b) < 16 {
		return Message{}, errBadMessage
	}
	var prio, ttl uint64
	for _, c := range b[1:8] {
		prio = prio<<8 | uint64(c)
	}
	for _, c := range b[8:14] {
		ttl = ttl<<8 | uint64(c)
	}
	n := int(binary.BigEndian.Uint16(b[14:16]))
	if len(b) < 16+n {
		return Message{}, errBadMessage
	}
	return Message{Type: topic.Type(b[0]), Priority: int64(prio), TTLMs: int64(ttl), Options: b[16 : 16+n], Body: b[16+n:]}, nil
}
