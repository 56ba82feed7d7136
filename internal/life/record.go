package life

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// States of a finished message's record, as lifelib.lua writes them.
const (
	RecordCompleted = 1
	RecordCancelled = 2
)

// Record is a finished message a topic retains.
type Record struct {
	State      int // RecordCompleted or RecordCancelled
	FinishedAt time.Time
	Result     []byte
	Envelope   []byte // the message's envelope when it finished
}

// ErrBadRecord is returned for a value that is no record of lifelib.lua.
var ErrBadRecord = errors.New("rmq: unreadable finished-message record")

// DecodeRecord reads a record: u8 version(1) | u8 state | u48 finishedAtMs
// | u32 resultLen | result | envelope.
func DecodeRecord(raw []byte) (Record, error) {
	if len(raw) < 12 || raw[0] != 1 || (raw[1] != RecordCompleted && raw[1] != RecordCancelled) {
		return Record{}, ErrBadRecord
	}
	var at [8]byte
	copy(at[2:], raw[2:8])
	n := int(binary.BigEndian.Uint32(raw[8:12]))
	if 12+n > len(raw) {
		return Record{}, ErrBadRecord
	}
	return Record{
		State:      int(raw[1]),
		FinishedAt: time.UnixMilli(int64(binary.BigEndian.Uint64(at[:]))),
		Result:     raw[12 : 12+n],
		Envelope:   raw[12+n:],
	}, nil
}

// Progress reads a progress value, "<delivery token>:<progress>", of the
// delivery with token; ok is false for another delivery's.
func Progress(raw string, token int64) (progress []byte, ok bool) {
	tok, p, found := strings.Cut(raw, ":")
	if !found || tok != strconv.FormatInt(token, 10) {
		return nil, false
	}
	return []byte(p), true
}

// Finish is what a finish channel says of a waited-for message.
type Finish struct {
	ID    string
	State byte // 'c' completed, 'd' dead, 'e' expired, 'x' cancelled, 'r' removed
	Data  []byte
}

// ParseFinish reads a finish channel payload, "<state><len(id)>:<id><data>".
func ParseFinish(p string) (Finish, error) {
	if len(p) < 3 || !strings.ContainsRune("cdexr", rune(p[0])) {
		return Finish{}, fmt.Errorf("rmq: bad finish word %q", p)
	}
	ls, rest, ok := strings.Cut(p[1:], ":")
	n, err := strconv.Atoi(ls)
	if !ok || err != nil || n < 1 || n > len(rest) {
		return Finish{}, fmt.Errorf("rmq: bad finish word %q", p)
	}
	f := Finish{State: p[0], ID: rest[:n]}
	if len(rest) > n {
		f.Data = []byte(rest[n:])
	}
	return f, nil
}
