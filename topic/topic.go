package topic

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Type is the kind of messages a topic carries. It decides what the store
// score means and how a repeated message merges.
type Type int

const (
	// RangeMerge messages are due timeRange after their first send; repeats
	// sent while the first waits merge into one delivery.
	RangeMerge Type = iota + 1
	// Priority messages are delivered highest priority first; priorities are
	// integers from MinPriority up.
	Priority
	// FixedTime messages are due at an exact instant; a repeat replaces it.
	FixedTime
)

// ErrConflict is returned when a topic is defined with another type or slot
// amount than the definition already stored in Redis. Changing either would
// strand messages in slots nobody reads, so it is refused.
var ErrConflict = errors.New("rmq: topic conflicts with its stored definition")

// MinPriority is the smallest priority a message may be sent with: scores
// below it (0..16) are reserved for retried priority messages, so every
// retry ranks below every fresh message.
const MinPriority = 17

// MaxSlotAmount is the largest number of slots a topic may have.
const MaxSlotAmount = 16384

// MaxNameLength is the longest topic name accepted.
const MaxNameLength = 128

var (
	// ErrInvalidName is returned for names outside [A-Za-z0-9._-]{1,128}.
	ErrInvalidName = errors.New("rmq: invalid topic name")
	// ErrInvalidSlotAmount is returned for slot amounts that are not a
	// power of two in 1..16384.
	ErrInvalidSlotAmount = errors.New("rmq: invalid slot amount")
	// ErrInvalidType is returned for an unknown message type.
	ErrInvalidType = errors.New("rmq: invalid topic type")
	// ErrInvalidDefinition is returned when a stored definition cannot be parsed.
	ErrInvalidDefinition = errors.New("rmq: invalid topic definition")
)

// String returns the lower-case name used in definitions and logs.
func (t Type) String() string {
	switch t {
	case RangeMerge:
		return "rangemerge"
	case Priority:
		return "priority"
	case FixedTime:
		return "fixedtime"
	default:
		return "Type(" + strconv.Itoa(int(t)) + ")"
	}
}

// Valid reports whether t is one of the three message types.
func (t Type) Valid() bool { return t >= RangeMerge && t <= FixedTime }

// TimeBased reports whether store scores are due times (RangeMerge and
// FixedTime) rather than priorities.
func (t Type) TimeBased() bool { return t == RangeMerge || t == FixedTime }

// ParseType is the inverse of Type.String.
func ParseType(s string) (Type, error) {
	switch strings.ToLower(s) {
	case "rangemerge", "range-merge", "range_merge":
		return RangeMerge, nil
	case "priority":
		return Priority, nil
	case "fixedtime", "fixed-time", "fixed_time":
		return FixedTime, nil
	}
	return 0, fmt.Errorf("%w: %q", ErrInvalidType, s)
}

// Topic is a validated topic definition. The zero value is not valid.
type Topic struct {
	name       string
	typ        Type
	slotAmount int
}

// New validates and returns a topic definition.
func New(name string, typ Type, slotAmount int) (Topic, error) {
	if err := ValidateName(name); err != nil {
		return Topic{}, err
	}
	if !typ.Valid() {
		return Topic{}, fmt.Errorf("%w: %d", ErrInvalidType, int(typ))
	}
	if slotAmount < 1 || slotAmount > MaxSlotAmount || slotAmount&(slotAmount-1) != 0 {
		return Topic{}, fmt.Errorf("%w: %d (want a power of two in 1..%d)", ErrInvalidSlotAmount, slotAmount, MaxSlotAmount)
	}
	return Topic{name: name, typ: typ, slotAmount: slotAmount}, nil
}

// MustNew is New that panics on error, for package-level topic variables.
func MustNew(name string, typ Type, slotAmount int) Topic {
	t, err := New(name, typ, slotAmount)
	if err != nil {
		panic(err)
	}
	return t
}

// ValidateName checks a topic name. Braces and colons are refused because
// they would break the Redis Cluster hash tag of the topic's keys.
func ValidateName(name string) error {
	if len(name) == 0 || len(name) > MaxNameLength {
		return fmt.Errorf("%w: length %d (want 1..%d)", ErrInvalidName, len(name), MaxNameLength)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("%w: %q (allowed: A-Z a-z 0-9 . _ -)", ErrInvalidName, name)
		}
	}
	return nil
}

// Name returns the topic name.
func (t Topic) Name() string { return t.name }

// Type returns the message type.
func (t Topic) Type() Type { return t.typ }

// SlotAmount returns the number of slots, a power of two.
func (t Topic) SlotAmount() int { return t.slotAmount }

// IsZero reports whether t is the zero Topic (not built by New).
func (t Topic) IsZero() bool { return t.name == "" }

// String returns "name(type/slots)".
func (t Topic) String() string {
	return fmt.Sprintf("%s(%s/%d)", t.name, t.typ, t.slotAmount)
}

// Definition is the text stored in Redis for this topic: "type:slotAmount".
// Two processes that define one topic differently are told so by comparing
// definitions.
func (t Topic) Definition() string {
	return t.typ.String() + ":" + strconv.Itoa(t.slotAmount)
}

// ParseDefinition rebuilds a Topic from its name and stored Definition.
func ParseDefinition(name, def string) (Topic, error) {
	typ, slots, ok := strings.Cut(def, ":")
	if !ok {
		return Topic{}, fmt.Errorf("%w: %q", ErrInvalidDefinition, def)
	}
	ty, err := ParseType(typ)
	if err != nil {
		return Topic{}, fmt.Errorf("%w: %q: %w", ErrInvalidDefinition, def, err)
	}
	n, err := strconv.Atoi(slots)
	if err != nil {
		return Topic{}, fmt.Errorf("%w: %q", ErrInvalidDefinition, def)
	}
	return New(name, ty, n)
}
