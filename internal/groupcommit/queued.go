package groupcommit

// Queued returns how many values wait for a round (not those of the rounds
// under way): tests use it to know that callers are queued behind busy
// rounds before letting the rounds finish.
func (g *Group[T]) Queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.q)
}
