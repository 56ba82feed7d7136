package main

import (
	"fmt"
	"io"
)

// bullName is the name of the BullMQ system of a run ("" when it did not run).
func bullName(systems []system) string {
	for _, s := range systems {
		if b, ok := s.(*bullSys); ok {
			return b.name()
		}
	}
	return ""
}

// shortName labels a system in the per-message tables.
func shortName(sys, rsys, bsys string) string {
	switch sys {
	case rsys:
		return "RMQ"
	case bsys:
		return "BullMQ"
	}
	return "asynq"
}

// printBullFootnote says how BullMQ ran and how its client costs were read.
func printBullFootnote(w io.Writer, env environment) {
	if env.bullmq == "" {
		return
	}
	fmt.Fprintf(w, "  %s (ioredis): a node process per case (bench/bullmq/driver.mjs), one Queue (add, addBulk of -batch,\n", env.bullmq)
	fmt.Fprintln(w, "  lateness: add with a delay to the due time), one Worker of -workers concurrency, default job options (completed")
	fmt.Fprintln(w, "  jobs are kept); its client CPU is that process's (/proc/<pid>/stat), wire bytes what it read and wrote and its")
	fmt.Fprintln(w, "  round trips its write calls (/proc/<pid>/io); its far-future jobs are delayed by a year.")
}

// latCell formats a lateness figure of a system's sample ("not run" when
// the system did not run the case).
func latCell(s *sample, v float64) string {
	if s == nil {
		return "not run"
	}
	return fmtMs(v)
}
