// Package actions carries out sessiond's escape hatches that act on
// processes: reap (orphaned tool processes) and stop (a session's owner).
// Each is planned first and every signal is preceded by a fresh identity
// probe, so a PID the kernel has reused is never hit.
package actions

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
)

// Prober answers liveness for an identity (proc.Host).
type Prober interface {
	Probe(proc.Identity) proc.Result
}

// Target is a process to terminate.
type Target struct {
	ID proc.Identity
	// Group signals the process group the process leads (a session sessiond
	// launched with setsid), so its tools go with it.
	Group bool
	// What describes it for the checklist (argv, role).
	What string
}

// Terminator sends signals. Signal is replaceable in tests.
type Terminator struct {
	Probe  Prober
	Signal func(pid int, sig syscall.Signal) error
	// Poll is how often it checks whether targets died (default 50 ms).
	Poll time.Duration
}

func (t *Terminator) signal(pid int, sig syscall.Signal) error {
	if t.Signal != nil {
		return t.Signal(pid, sig)
	}
	return syscall.Kill(pid, sig)
}

func target(tg Target) string {
	if tg.Group {
		return fmt.Sprintf("process group %d", tg.ID.PID)
	}
	return fmt.Sprintf("pid %d", tg.ID.PID)
}

// Plan lists the steps Terminate would take, without signalling.
func (t *Terminator) Plan(targets []Target, timeout time.Duration, force bool) []adapters.Step {
	var steps []adapters.Step
	for _, tg := range targets {
		if r := t.Probe.Probe(tg.ID); r.Liveness != proc.Alive {
			steps = append(steps, adapters.Step{Action: "nothing to signal", Target: target(tg), Detail: tg.What + ": " + r.Reason, Outcome: adapters.OutcomeSkipped})
			continue
		}
		if force {
			steps = append(steps, adapters.Step{Action: "SIGKILL", Target: target(tg), Detail: tg.What, Outcome: adapters.OutcomePlanned})
			continue
		}
		steps = append(steps, adapters.Step{Action: "SIGTERM, then SIGKILL after " + timeout.String(), Target: target(tg), Detail: tg.What, Outcome: adapters.OutcomePlanned})
	}
	return steps
}

// Terminate sends SIGTERM (SIGKILL when force) to every target still
// alive, waits up to timeout for them to die, then SIGKILLs survivors.
// Each signal is preceded by a probe of the exact identity.
func (t *Terminator) Terminate(ctx context.Context, targets []Target, timeout time.Duration, force bool) []adapters.Step {
	poll := t.Poll
	if poll <= 0 {
		poll = 50 * time.Millisecond
	}
	steps := make([]adapters.Step, len(targets))
	first := syscall.SIGTERM
	if force {
		first = syscall.SIGKILL
	}
	sent := map[int]bool{}
	for i, tg := range targets {
		steps[i] = t.send(tg, first)
		if steps[i].Outcome == adapters.OutcomeDone {
			sent[i] = true
		}
	}
	deadline := time.Now().Add(timeout)
	for len(sent) > 0 {
		for i := range sent {
			if t.Probe.Probe(targets[i].ID).Liveness != proc.Alive {
				steps[i].Detail += "; exited"
				delete(sent, i)
			}
		}
		if len(sent) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(poll)
	}
	for i := range sent {
		// Still alive after the timeout.
		k := t.send(targets[i], syscall.SIGKILL)
		steps[i].Action += ", SIGKILL after " + timeout.String()
		if k.Outcome != adapters.OutcomeDone {
			steps[i].Outcome, steps[i].Error = k.Outcome, k.Error
			continue
		}
		for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(poll) {
			if t.Probe.Probe(targets[i].ID).Liveness != proc.Alive {
				steps[i].Detail += "; killed"
				break
			}
		}
	}
	return steps
}

// send probes the identity and signals it only if it is still that process.
func (t *Terminator) send(tg Target, sig syscall.Signal) adapters.Step {
	s := adapters.Step{Action: sig.String(), Target: target(tg), Detail: tg.What}
	if sig == syscall.SIGTERM {
		s.Action = "SIGTERM"
	} else if sig == syscall.SIGKILL {
		s.Action = "SIGKILL"
	}
	if r := t.Probe.Probe(tg.ID); r.Liveness != proc.Alive {
		s.Outcome, s.Detail = adapters.OutcomeSkipped, tg.What+": not signalled, "+r.Reason
		return s
	}
	pid := tg.ID.PID
	if tg.Group {
		pid = -pid
	}
	if err := t.signal(pid, sig); err != nil {
		s.Outcome, s.Error = adapters.OutcomeFailed, err.Error()
		return s
	}
	s.Outcome = adapters.OutcomeDone
	return s
}
