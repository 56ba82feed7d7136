package auth

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rmq-go/rmq/internal/lifecycle"
)

// TokenWatch ends the long polls of a deleted token. Its token is checked
// when a consume starts; without this a long poll opened just before the
// token was deleted could still deliver a job up to --max-wait later.
//
// A deletion through this process ends the token's long polls at once
// (tokenStore.remove calls revoked). A deletion through another rmqd is
// seen by this process's check: every interval it asks Redis, in one
// pipeline, whether each token that has a long poll open here still
// exists (one HEXISTS per token, not per poll; nothing when no poll is
// open), and forgets a deleted one from the token cache. An ended long
// poll answers as one that found nothing (404 no job available); the
// client's next request gets 401.
type TokenWatch struct {
	store    *TokenStore
	interval time.Duration
	log      *slog.Logger

	mu    sync.Mutex
	polls map[TokenRef]map[*watcher]struct{}

	loops *lifecycle.Group // run
}

type watcher struct{ cancel context.CancelFunc }

// NewTokenWatch starts the check; close stops it.
func NewTokenWatch(store *TokenStore, interval time.Duration, log *slog.Logger) *TokenWatch {
	w := &TokenWatch{store: store, interval: interval, log: log,
		polls: map[TokenRef]map[*watcher]struct{}{}, loops: lifecycle.NewGroup(context.Background())}
	w.loops.Go("rmqd token watch", w.run)
	return w
}

// Close stops the check and waits for it.
func (w *TokenWatch) Close() { w.loops.Stop() }

// Watch returns a context that is cancelled when ref is deleted (or ctx
// ends); release must be called when the poll ends.
func (w *TokenWatch) Watch(ctx context.Context, ref TokenRef) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	wt := &watcher{cancel}
	w.mu.Lock()
	set := w.polls[ref]
	if set == nil {
		set = map[*watcher]struct{}{}
		w.polls[ref] = set
	}
	set[wt] = struct{}{}
	w.mu.Unlock()
	return ctx, func() {
		cancel()
		w.mu.Lock()
		delete(set, wt)
		if len(set) == 0 {
			delete(w.polls, ref)
		}
		w.mu.Unlock()
	}
}

// Revoked ends the long polls of ref.
func (w *TokenWatch) Revoked(ref TokenRef) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for wt := range w.polls[ref] {
		wt.cancel()
	}
}

func (w *TokenWatch) run(ctx context.Context) {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := w.check(ctx); err != nil && ctx.Err() == nil {
			// Redis is away: the polls go on, and so do their own errors.
			w.log.DebugContext(ctx, "rmqd: check the tokens of long polls", "err", err)
		}
	}
}

// check asks Redis whether each watched token still exists.
func (w *TokenWatch) check(ctx context.Context) error {
	w.mu.Lock()
	refs := make([]TokenRef, 0, len(w.polls))
	for ref := range w.polls {
		refs = append(refs, ref)
	}
	w.mu.Unlock()
	if len(refs) == 0 {
		return nil
	}
	cmds := make([]*redis.BoolCmd, len(refs))
	_, err := w.store.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, ref := range refs {
			cmds[i] = p.HExists(ctx, w.store.key(ref.Pool, ref.Ns), Digest(ref.Token))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, c := range cmds {
		if !c.Val() {
			// Deleted through another process: this one's cache forgets
			// it too, so the client's next request is refused at once.
			w.store.forget(refs[i])
			w.Revoked(refs[i])
		}
	}
	return nil
}
