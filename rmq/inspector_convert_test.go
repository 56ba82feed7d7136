package rmq

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/rmq-go/rmq/internal/inspect"
	"github.com/rmq-go/rmq/topic"
)

// fill sets every field of the struct v points to to a distinct non-zero
// value, so a conversion that drops or swaps a field shows.
func fill(t *testing.T, v reflect.Value, seed *int) {
	t.Helper()
	for j := range v.NumField() {
		f := v.Field(j)
		if !f.CanSet() {
			continue
		}
		*seed++
		n := *seed
		switch f.Kind() {
		case reflect.String:
			f.SetString("s" + string(rune('a'+n%26)) + time.Duration(n).String())
		case reflect.Int, reflect.Int64:
			if f.Type() == reflect.TypeFor[time.Duration]() {
				f.SetInt(int64(n) * int64(time.Millisecond))
			} else {
				f.SetInt(int64(n))
			}
		case reflect.Float64:
			f.SetFloat(float64(n) + 0.5)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Slice:
			switch f.Type().Elem().Kind() {
			case reflect.Uint8:
				f.SetBytes([]byte{byte(n)})
			case reflect.Struct:
				s := reflect.MakeSlice(f.Type(), 2, 2)
				for k := range 2 {
					fill(t, s.Index(k), seed)
				}
				f.Set(s)
			default:
				t.Fatalf("fill: slice of %v", f.Type())
			}
		case reflect.Map:
			f.Set(reflect.ValueOf(map[string]string{"k": time.Duration(n).String()}))
		case reflect.Struct:
			switch f.Type() {
			case reflect.TypeFor[time.Time]():
				f.Set(reflect.ValueOf(time.UnixMilli(int64(n) * 1000)))
			case reflect.TypeFor[topic.Topic]():
				f.Set(reflect.ValueOf(topic.MustNew("conv", topic.Priority, 1<<(n%8))))
			default:
				t.Fatalf("fill: %v", f.Type())
			}
		default:
			t.Fatalf("fill: %v", f.Type())
		}
	}
}

// same checks that every exported field of in but skip has a field of that
// name in out with the same value (a string-kinded one compared as a
// string).
func same(t *testing.T, what string, in, out reflect.Value, skip ...string) {
	t.Helper()
	for j := range in.NumField() {
		name := in.Type().Field(j).Name
		if !in.Type().Field(j).IsExported() || slices.Contains(skip, name) {
			continue
		}
		o := out.FieldByName(name)
		if !o.IsValid() {
			t.Errorf("%s: field %s is lost", what, name)
			continue
		}
		a, b := in.Field(j), o
		if a.Kind() == reflect.String {
			if a.String() != b.String() {
				t.Errorf("%s.%s: %q, want %q", what, name, b.String(), a.String())
			}
			continue
		}
		if a.Kind() == reflect.Slice && a.Type().Elem().Kind() == reflect.Struct {
			if a.Len() != b.Len() {
				t.Errorf("%s.%s: %d entries, want %d", what, name, b.Len(), a.Len())
				continue
			}
			for k := range a.Len() {
				same(t, what+"."+name, a.Index(k), b.Index(k))
			}
			continue
		}
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			t.Errorf("%s.%s: %v, want %v", what, name, b.Interface(), a.Interface())
		}
	}
}

// The Inspector's results are internal/inspect's converted: every field
// the internal types carry reaches the public ones, and a dead message's
// cursor (which keeps the exact dead score) survives the conversion.
func TestInspectorConversionsKeepEveryField(t *testing.T) {
	seed := 0
	var m inspect.MessageInfo
	fill(t, reflect.ValueOf(&m).Elem(), &seed)
	same(t, "MessageInfo", reflect.ValueOf(m), reflect.ValueOf(messageInfo(m)))

	var d inspect.DeadMessage
	fill(t, reflect.ValueOf(&d).Elem(), &seed)
	pd := deadMessage(d)
	same(t, "DeadMessage", reflect.ValueOf(d), reflect.ValueOf(pd), "Score")
	if pd.score != d.Score {
		t.Errorf("dead score %v, want %v", pd.score, d.Score)
	}
	if pd.Cursor() != d.Cursor() {
		t.Errorf("cursor %q, want %q", pd.Cursor(), d.Cursor())
	}

	var w inspect.WaitingMessage
	fill(t, reflect.ValueOf(&w).Elem(), &seed)
	same(t, "WaitingMessage", reflect.ValueOf(w), reflect.ValueOf(WaitingMessage(w)))

	var s inspect.Stats
	fill(t, reflect.ValueOf(&s).Elem(), &seed)
	same(t, "Stats", reflect.ValueOf(s), reflect.ValueOf(statsOf(s)))
}
