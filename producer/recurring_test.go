package producer_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/topic"
)

func TestParseRecurring(t *testing.T) {
	r, err := producer.ParseRecurring(topic.FixedTime)
	require.NoError(t, err)
	assert.Equal(t, producer.RecurringOptions{MaxRetries: -1}, r)
	assert.Empty(t, r.SendOptions())

	h := map[string]string{"k": "v"}
	r, err = producer.ParseRecurring(topic.Priority, producer.WithMaxRetries(2), producer.WithTTL(time.Minute),
		producer.WithTimeout(time.Second), producer.WithHeaders(h))
	require.NoError(t, err)
	want := producer.RecurringOptions{MaxRetries: 2, TTL: time.Minute, Timeout: time.Second, Headers: h}
	assert.Equal(t, want, r)
	back, err := producer.ParseRecurring(topic.Priority, r.SendOptions()...)
	require.NoError(t, err)
	assert.Equal(t, want, back, "SendOptions reads back")
	h["k"] = "changed"
	assert.Equal(t, "v", r.Headers["k"], "the headers are copied")

	for name, c := range map[string]struct {
		opt  producer.SendOption
		want error
	}{
		"key":        {producer.WithKey("k"), producer.ErrInvalidRecurring},
		"slot basis": {producer.WithSlotBasis([]byte("b")), producer.ErrInvalidRecurring},
		"expires at": {producer.WithExpiresAt(time.Now().Add(time.Hour)), producer.ErrInvalidRecurring},
		"not before": {producer.WithNotBefore(time.Now().Add(time.Hour)), producer.ErrInvalidRecurring},
		"delay":      {producer.WithDelay(time.Second), producer.ErrInvalidRecurring},
		"retries":    {producer.WithMaxRetries(999), producer.ErrInvalidMaxRetries},
		"ttl":        {producer.WithTTL(-time.Second), producer.ErrInvalidExpiry},
		"timeout":    {producer.WithTimeout(48 * time.Hour), producer.ErrInvalidTimeout},
		"header":     {producer.WithHeaders(map[string]string{"": "v"}), producer.ErrInvalidHeaders},
	} {
		_, err := producer.ParseRecurring(topic.Priority, c.opt)
		assert.ErrorIs(t, err, c.want, name)
	}
	_, err = producer.ParseRecurring(topic.FixedTime, producer.WithDelay(time.Second))
	assert.ErrorIs(t, err, producer.ErrTypeMismatch, "a delay on a fixed-time topic is the type's error first")
}
