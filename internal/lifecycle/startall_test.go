package lifecycle

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// owner records its Start and Close; fail makes its Start fail.
type owner struct {
	fail            error
	started, closed atomic.Int32
}

func (o *owner) Start(context.Context) error {
	o.started.Add(1)
	return o.fail
}

func (o *owner) Close(context.Context) error {
	o.closed.Add(1)
	return nil
}

func TestStartAllClosesTheStartedOnFailure(t *testing.T) {
	boom := errors.New("boom")
	owners := []*owner{{}, {}, {fail: boom}, {}}
	// parallel 1: owners start in order, so the one after the failure
	// never starts.
	i, err := StartAll(context.Background(), owners, 1)
	if i != 2 || !errors.Is(err, boom) {
		t.Fatalf("StartAll = %d, %v; want 2, boom", i, err)
	}
	for j, want := range []struct{ started, closed int32 }{{1, 1}, {1, 1}, {1, 0}, {0, 0}} {
		if s, c := owners[j].started.Load(), owners[j].closed.Load(); s != want.started || c != want.closed {
			t.Errorf("owner %d: started %d, closed %d; want %d, %d", j, s, c, want.started, want.closed)
		}
	}
}

func TestStartAllAndCloseAll(t *testing.T) {
	owners := []*owner{{}, {}, {}}
	if i, err := StartAll(context.Background(), owners, 2); i != -1 || err != nil {
		t.Fatalf("StartAll = %d, %v; want -1, nil", i, err)
	}
	errs := CloseAll(context.Background(), owners)
	if len(errs) != 3 || errors.Join(errs...) != nil {
		t.Fatalf("CloseAll = %v", errs)
	}
	for j, o := range owners {
		if o.started.Load() != 1 || o.closed.Load() != 1 {
			t.Errorf("owner %d: started %d, closed %d; want 1, 1", j, o.started.Load(), o.closed.Load())
		}
	}
}
