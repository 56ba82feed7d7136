package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rmq-go/rmq/consumer"
	"github.com/rmq-go/rmq/producer"
	"github.com/rmq-go/rmq/rmq"
	"github.com/rmq-go/rmq/topic"
)

// The topic page and the JSON snapshot show a topic's flow control: its
// stored limits, the messages waiting in groups (not counted as delayed),
// and the adaptive limit a consuming client reports.
func TestTopicPageShowsFlowControl(t *testing.T) {
	e := newEnv(t)
	tp := e.topic("tenants", topic.FixedTime, 2)
	ctx := context.Background()
	for i, g := range []string{"a", "a", "b"} {
		_, err := e.prod.SendFixedTime(ctx, tp, []byte(fmt.Sprintf("m%d", i)), time.Now().Add(time.Hour), producer.WithGroup(g))
		require.NoError(t, err)
	}
	require.NoError(t, e.insp.SetLimits(ctx, tp, rmq.Limits{Rate: 20, RatePer: time.Second, GroupConcurrency: 1}))
	busy := e.topic("busy", topic.FixedTime, 1)
	e.client(busy, func(context.Context, *consumer.Message) error { return nil }, consumer.WithAdaptiveConcurrency(3, 12))

	page := e.get("topic?name=tenants")
	assert.Contains(t, page, `<b id="c-grouped">3</b>waiting in 2 groups`)
	assert.Contains(t, page, `<td id="limits">rate=20/1s gconc=1</td>`)
	assert.Regexp(t, `<b>0</b>delayed`, page, "grouped messages are not counted as delayed")
	e.waitFor("the adaptive limit reported", func() bool {
		return strings.Contains(e.get("topic?name=busy"), `<td class="adaptive">3 of 3..12`)
	})

	var snap struct {
		Topics []struct {
			Name     string `json:"name"`
			Limits   string `json:"limits"`
			Grouped  int64  `json:"grouped"`
			Adaptive []int  `json:"adaptive"`
		} `json:"topics"`
	}
	require.NoError(t, json.Unmarshal([]byte(e.get("api/overview")), &snap))
	got := map[string]string{}
	for _, x := range snap.Topics {
		got[x.Name] = fmt.Sprintf("%s|%d|%v", x.Limits, x.Grouped, x.Adaptive)
	}
	assert.Equal(t, map[string]string{"tenants": "rate=20/1s gconc=1|3|[]", "busy": "|0|[3]"}, got)
}
