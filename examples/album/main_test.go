package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/internal/testkit/redistest"
)

func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }

// The album runs once, after all 100 resizes, with their 100 results.
func TestAlbum(t *testing.T) {
	rdb := redistest.Client(t, redistest.Shared(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, rdb, redistest.Prefix(t), "a1", &out))
	assert.Contains(t, out.String(), "album a1: built from 100 images after 100 resizes (first thumbs/a1-img-")
	assert.Equal(t, 1, strings.Count(out.String(), "album a1: built"))
}
