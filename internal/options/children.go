package options

import "context"

// Child is a finished flow child as consumer.Message.Children returns it.
type Child struct {
	Topic, ID, State string
	Result           []byte
	Error            string
}

// ChildrenFunc reads the finished children of the parent id of slot of
// the topic named topicName, in the order they finished.
type ChildrenFunc func(ctx context.Context, topicName string, slot int, id string) ([]Child, error)

type childrenKey struct{}

// WithChildren returns ctx carrying f, which the engine puts into the
// base of its handlers' contexts, as WithProgress.
func WithChildren(ctx context.Context, f ChildrenFunc) context.Context {
	return context.WithValue(ctx, childrenKey{}, f)
}

// ChildrenFrom returns the reader ctx carries, nil when none.
func ChildrenFrom(ctx context.Context) ChildrenFunc {
	f, _ := ctx.Value(childrenKey{}).(ChildrenFunc)
	return f
}
