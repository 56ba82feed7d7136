package main

import "fmt"

const pauseHelp = `Usage:
  rmqctl pause TOPIC

Pause TOPIC: every consumer of it, in every process, stops fetching within
the time a published message takes to arrive (deliveries in flight finish;
sends are still accepted). The state is stored in Redis, so consumers that
start later stay paused until 'rmqctl resume TOPIC'.
`

const resumeHelp = `Usage:
  rmqctl resume TOPIC

Resume a paused TOPIC: its consumers fetch again at once.
`

func (a *app) pause(args []string) error  { return a.setPaused("pause", args, true) }
func (a *app) resume(args []string) error { return a.setPaused("resume", args, false) }

func (a *app) setPaused(name string, args []string, paused bool) error {
	c := find(name)
	pos, err := a.parseArgs(c, c.flags(), args, "TOPIC")
	if err != nil {
		return err
	}
	ctx, cancel := a.context()
	defer cancel()
	t, err := a.topic(ctx, pos[0])
	if err != nil {
		return err
	}
	if paused {
		err = a.insp.Pause(ctx, t)
	} else {
		err = a.insp.Resume(ctx, t)
	}
	if err != nil {
		return err
	}
	if a.output == "json" {
		return writeJSON(a.stdout, map[string]any{"topic": t.Name(), "paused": paused})
	}
	fmt.Fprintf(a.stdout, "%sd %s\n", name, t.Name())
	return nil
}
