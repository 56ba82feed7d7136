package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// httpLateness publishes httpLateRate×httpLateSpread jobs due one every
// 1/rate apart (at=, an absolute instant, so the due time is exact rather
// than the server's receive time plus a delay) while httpClients consumers
// long-poll (timeout=3); lateness is the instant the consume answer arrived
// minus the job's due instant, at full precision.
func httpLateness(ctx context.Context, t *httpTarget, q string, size int) waveResult {
	n := int(httpLateRate * httpLateSpread.Seconds())
	var w waveResult
	body := httpBody(size)
	first := time.Now().Add(httpLateLead).Truncate(time.Millisecond)
	due := make(map[string]time.Time, n)
	var mu sync.Mutex
	lats := make([]time.Duration, 0, n)
	var got atomic.Int64

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var cerr error
	var cerrOnce sync.Once
	url := t.api + "/api/" + httpNS + "/" + q + "?ttr=60&timeout=3"
	end := first.Add(httpLateSpread + 30*time.Second)
	for range httpClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for got.Load() < int64(n) && cctx.Err() == nil && time.Now().Before(end) {
				st, b, err := t.do(cctx, http.MethodGet, url, nil)
				arrived := time.Now()
				if cctx.Err() != nil {
					return
				}
				if err == nil && st == http.StatusNotFound {
					continue
				}
				var j consumed
				if err == nil && (st != http.StatusOK || json.Unmarshal(b, &j) != nil) {
					err = fmt.Errorf("consume: %d %s", st, b)
				}
				if err != nil {
					cerrOnce.Do(func() { cerr = err })
					return
				}
				mu.Lock()
				d, ok := due[j.JobID]
				if ok {
					delete(due, j.JobID)
					lats = append(lats, arrived.Sub(d))
				} else {
					w.extra++
				}
				mu.Unlock()
				if ok {
					got.Add(1)
				}
				_, _, _ = t.do(cctx, http.MethodDelete, t.api+"/api/"+httpNS+"/"+q+"/job/"+j.JobID, nil)
			}
		}()
	}

	// Publish from httpClients goroutines; the ids are recorded under mu
	// before a consumer can see them (they are due ≥ the lead ahead).
	var next atomic.Int64
	perr := httpParallel(ctx, func(ctx context.Context) error {
		for {
			i := int(next.Add(1)) - 1
			if i >= n {
				return nil
			}
			at := first.Add(time.Duration(i) * time.Second / httpLateRate)
			st, b, err := t.do(ctx, http.MethodPut, t.api+"/api/"+httpNS+"/"+q+"?tries=3&ttl=0&at="+at.UTC().Format(time.RFC3339Nano), body)
			if err != nil {
				return err
			}
			var j consumed
			if st != http.StatusCreated || json.Unmarshal(b, &j) != nil {
				return fmt.Errorf("publish: %d %s", st, b)
			}
			mu.Lock()
			due[j.JobID] = at
			mu.Unlock()
		}
	})
	w.sent = min(int(next.Load()), n)
	w.margin = time.Until(first)
	if perr != nil {
		w.err = "publish: " + perr.Error()
		cancel()
	}
	wg.Wait()
	if cerr != nil && w.err == "" {
		w.err = cerr.Error()
	}
	w.fired = len(lats)
	if len(lats) > 0 {
		slices.Sort(lats)
		w.p50 = lats[len(lats)/2]
		w.p99 = lats[min(len(lats)-1, len(lats)*99/100)]
		w.max = lats[len(lats)-1]
		for _, l := range lats {
			if l < 0 {
				w.early++
			}
		}
	}
	if w.err == "" && w.fired < n {
		w.err = fmt.Sprintf("%d of %d delivered", w.fired, n)
	}
	return w
}
