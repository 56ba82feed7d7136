package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/rmq-go/rmq/rmq"
)

const flowHelp = `Usage:
  rmqctl flow TOPIC ID

Draws the flow below the message ID of TOPIC (a tree sent with
producer.SendFlow) as text, one node a line with its state:
waiting_children (a parent whose children have not all finished),
waiting, delayed, in_flight, dead, or how a finished child ended
(completed, cancelled, removed), and a dead node's last error. A message
that is no parent is drawn alone. Exits 1 if there is no such message.
`

func (a *app) flow(args []string) error {
	ctx, cancel, t, id, err := a.topicAndID("flow", args)
	defer cancel()
	if err != nil {
		return err
	}
	f, err := a.insp.Flow(ctx, t, id)
	if errors.Is(err, rmq.ErrMessageNotFound) {
		return fmt.Errorf("no message %q in %s: not found", id, t.Name())
	}
	if err != nil {
		return err
	}
	if a.output == "json" {
		return writeJSON(a.stdout, flowJSON(f))
	}
	drawFlow(a.stdout, f, "", "")
	return nil
}

// drawFlow writes f's node after head, and its children below it, each
// line after prefix.
func drawFlow(w io.Writer, f rmq.FlowInfo, head, prefix string) {
	line := head + f.Node.Topic.Name() + "/" + f.Node.ID + "  " + string(f.Node.State)
	if f.Node.State == rmq.StateDead && f.Node.LastError != "" {
		line += "  (" + f.Node.LastError + ")"
	}
	fmt.Fprintln(w, line)
	for i, c := range f.Children {
		if i == len(f.Children)-1 {
			drawFlow(w, c, prefix+"└── ", prefix+"    ")
		} else {
			drawFlow(w, c, prefix+"├── ", prefix+"│   ")
		}
	}
}

type flowNodeJSON struct {
	Topic     string         `json:"topic"`
	ID        string         `json:"id"`
	State     string         `json:"state"`
	LastError string         `json:"last_error,omitempty"`
	Children  []flowNodeJSON `json:"children,omitempty"`
}

func flowJSON(f rmq.FlowInfo) flowNodeJSON {
	out := flowNodeJSON{Topic: f.Node.Topic.Name(), ID: f.Node.ID, State: string(f.Node.State), LastError: f.Node.LastError}
	for _, c := range f.Children {
		out.Children = append(out.Children, flowJSON(c))
	}
	return out
}
