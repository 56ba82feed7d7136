package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

// MergeWindow is how long a price change waits for later changes of the
// same SKU to merge into it.
const MergeWindow = 500 * time.Millisecond

// priceChange is the body of a price-change message.
type priceChange struct {
	SKU   string `json:"sku"`
	Price string `json:"price"`
	Seq   int    `json:"seq"` // per SKU, from 1: which change this is
}

// PriceMerge shows RangeMerge messages: a downstream system (a search index,
// a cache, a partner feed) wants the current price of a SKU, not every
// intermediate one. Each change is sent with the SKU as key and a
// MergeWindow range; changes of one SKU arriving within the window of the
// first merge into one delivery, due MergeWindow after that first change,
// carrying the latest body.
//
// Two bursts (waves) of 10 changes per SKU for 3 SKUs, 1.2 s apart: 60
// changes sent, 6 deliveries (3 SKUs x 2 windows), each with the latest price.
func PriceMerge(ctx context.Context, env Env) (err error) {
	fmt.Fprintf(env.Out, "== Price-change merge (RangeMerge): bursts of changes per SKU collapse into one delivery per %v window\n", MergeWindow)
	changes := topic.MustNew("price-changes", topic.RangeMerge, 8)
	c, err := newClient(env)
	if err != nil {
		return err
	}
	defer closeClient(c, &err)

	clk := newClock(env.Out)
	skus := []string{"sku-keyboard", "sku-mouse", "sku-monitor"}
	var mu sync.Mutex
	sentSeq := map[string]int{}      // last change sent per SKU
	deliveredSeq := map[string]int{} // last change delivered per SKU
	deliveries := 0
	var problems []string
	err = c.Register(changes, consumer.ListenerFunc(func(ctx context.Context, m *consumer.Message) error {
		now := time.Now()
		var pc priceChange
		if err := json.Unmarshal(m.Body, &pc); err != nil {
			return err // rolled back and retried; never happens here
		}
		mu.Lock()
		merged := pc.Seq - deliveredSeq[pc.SKU]
		deliveredSeq[pc.SKU] = pc.Seq
		deliveries++
		if now.Before(m.DueAt) {
			problems = append(problems, fmt.Sprintf("%s delivered %v before its due time", pc.SKU, m.DueAt.Sub(now)))
		}
		mu.Unlock()
		clk.say("%-12s → price %6s  (change #%d, the latest of %d merged; window opened %s, due %s, fired %s late)",
			pc.SKU, pc.Price, pc.Seq, merged, clk.since(m.FirstSentAt), clk.since(m.DueAt), ms(now.Sub(m.DueAt)))
		return nil
	}))
	if err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	p := c.Producer()

	rng := rand.New(rand.NewPCG(1, 2))
	sent := 0
	for wave := range 2 {
		if err := clk.sleepUntil(ctx, time.Duration(wave)*1200*time.Millisecond); err != nil {
			return err
		}
		clk.say("wave %d: sending 10 price changes for each of %d SKUs, interleaved, over ~300ms", wave+1, len(skus))
		// 10 changes per SKU, interleaved in random order.
		var order []string
		for _, s := range skus {
			for range 10 {
				order = append(order, s)
			}
		}
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, sku := range order {
			mu.Lock()
			sentSeq[sku]++
			seq := sentSeq[sku]
			mu.Unlock()
			price := fmt.Sprintf("%d.%02d", 20+rng.IntN(80), rng.IntN(100))
			body, _ := json.Marshal(priceChange{SKU: sku, Price: price, Seq: seq})
			if _, err := p.SendRangeMerge(ctx, changes, body, MergeWindow, producer.WithKey(sku)); err != nil {
				return err
			}
			sent++
			time.Sleep(10 * time.Millisecond)
		}
		clk.say("wave %d sent; the latest change of each SKU is #%d", wave+1, 10*(wave+1))
	}

	if err := waitFor(ctx, 5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range skus {
			if deliveredSeq[s] != sentSeq[s] {
				return false
			}
		}
		return true
	}); err != nil {
		return fmt.Errorf("waiting for the latest prices: %w", err)
	}

	mu.Lock()
	defer mu.Unlock()
	fmt.Fprintf(env.Out, "  result: %d price changes sent for %d SKUs → %d deliveries (expected %d: one per SKU per window), each with the latest price\n",
		sent, len(skus), deliveries, 2*len(skus))
	if len(problems) > 0 {
		return fmt.Errorf("%v", problems)
	}
	return nil
}
