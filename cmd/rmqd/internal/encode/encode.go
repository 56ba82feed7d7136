package encode

import (
	"encoding/base64"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Hand-written encoders for the answers of the hot routes (publish,
// consume): the same bytes as encoding/json gives for these types (a test
// compares them), without its reflection and its allocations.

// AppendJSONString appends s as a JSON string the way encoding/json does:
// '"', '\\' and control characters escaped, '<', '>' and '&' as \u00XX,
// U+2028 and U+2029 escaped, invalid UTF-8 as U+FFFD.
func AppendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// PublishedJSON is publishedBody{"published", id} encoded.
func PublishedJSON(id string) []byte {
	b := make([]byte, 0, 32+len(id))
	b = append(b, `{"msg":"published","job_id":`...)
	b = AppendJSONString(b, id)
	return append(b, '}')
}

// appendJSON appends j as encoding/json encodes a jobBody.
func (j *JobBody) appendJSON(b []byte) []byte {
	b = append(b, '{')
	if j.Msg != "" {
		b = append(b, `"msg":`...)
		b = AppendJSONString(b, j.Msg)
		b = append(b, ',')
	}
	b = append(b, `"namespace":`...)
	b = AppendJSONString(b, j.Namespace)
	b = append(b, `,"queue":`...)
	b = AppendJSONString(b, j.Queue)
	b = append(b, `,"job_id":`...)
	b = AppendJSONString(b, j.JobID)
	b = append(b, `,"data":`...)
	if j.Data == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, j.Data)
		b = append(b, '"')
	}
	b = append(b, `,"ttl":`...)
	b = strconv.AppendInt(b, j.TTL, 10)
	b = append(b, `,"elapsed_ms":`...)
	b = strconv.AppendInt(b, j.ElapsedMS, 10)
	b = append(b, `,"remain_tries":`...)
	b = strconv.AppendInt(b, int64(j.RemainTries), 10)
	b = append(b, `,"attributes":`...)
	if j.Attributes == nil {
		b = append(b, "null"...)
	} else {
		keys := make([]string, 0, len(j.Attributes))
		for k := range j.Attributes {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendJSONString(b, k)
			b = append(b, ':')
			b = AppendJSONString(b, j.Attributes[k])
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// jobSize guesses the encoded size of j, to allocate once.
func (j *JobBody) jobSize() int {
	n := 160 + len(j.Namespace) + len(j.Queue) + len(j.JobID) + base64.StdEncoding.EncodedLen(len(j.Data))
	for k, v := range j.Attributes {
		n += len(k) + len(v) + 6
	}
	return n
}

// JobsJSON encodes one job as an object, or several as an array (count > 1).
func JobsJSON(jobs []JobBody, array bool) []byte {
	n := 2
	for i := range jobs {
		n += jobs[i].jobSize() + 1
	}
	b := make([]byte, 0, n)
	if !array {
		return jobs[0].appendJSON(b)
	}
	b = append(b, '[')
	for i := range jobs {
		if i > 0 {
			b = append(b, ',')
		}
		b = jobs[i].appendJSON(b)
	}
	return append(b, ']')
}

// JobBody is a job as consume and peek answer it. data is standard base64;
// nil encodes as null (a peeked head whose data is gone), empty as "".
type JobBody struct {
	Msg         string            `json:"msg,omitempty"`
	Namespace   string            `json:"namespace"`
	Queue       string            `json:"queue"`
	JobID       string            `json:"job_id"`
	Data        []byte            `json:"data"`
	TTL         int64             `json:"ttl"`
	ElapsedMS   int64             `json:"elapsed_ms"`
	RemainTries int               `json:"remain_tries"`
	Attributes  map[string]string `json:"attributes"`
}
