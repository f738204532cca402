// Package actions carries out sessiond's escape hatches that act on
// processes: reap (orphaned tool processes) and stop (a session's owner).
// Each is planned first and every signal is preceded by a fresh identity
// probe, so a PID the kernel has reused is never hit.
//
// Process groups: stop of a session sessiond launched (with setsid)
// signals the group its owner leads and waits until no process of that
// group is left, SIGKILLing the group after the timeout, so a tool that
// ignores SIGTERM does not outlive the stop. Reap signals a process group
// as one only when every live member of the group is among its targets,
// each confirmed by its identity just before the signal; a group that also
// holds anything else gets one signal per attributed pid.
package actions

import (
	"context"
	"fmt"
	"strconv"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
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

// member is a live process of a process group, named by pid and start
// ticks as proc.Identity names it.
type member struct {
	PID        int
	StartTicks uint64
}

// killWait bounds the wait for a SIGKILLed process to be gone.
const killWait = 2 * time.Second

func (t *Terminator) signal(pid int, sig syscall.Signal) error {
	// kill(0) reaches sessiond's own group, kill(-1) every process it may
	// signal, kill(1) init: no target is ever one of them, whatever a
	// record or an observation says.
	if pid >= -1 && pid <= 1 {
		return fmt.Errorf("refuse to send %s to pid %d: never a target", sigName(sig), pid)
	}
	if pid < 0 && -pid == syscall.Getpgrp() {
		return fmt.Errorf("refuse to send %s to process group %d: it is sessiond's own", sigName(sig), -pid)
	}
	if t.Signal != nil {
		return t.Signal(pid, sig)
	}
	return syscall.Kill(pid, sig)
}

func sigName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	}
	return sig.String()
}

func target(tg Target) string {
	if tg.Group {
		return fmt.Sprintf("process group %d", tg.ID.PID)
	}
	return fmt.Sprintf("pid %d", tg.ID.PID)
}

// unit is what one round of signals covers: a single target (pgid 0),
// signalled by pid or as the group it leads, or targets that are together
// every live process of process group pgid, signalled as that group.
type unit struct {
	pgid int
	idx  []int
}

// wholeGroupNote ends the detail of a target signalled through its group.
const wholeGroupNote = "; every live process of its group is a target, so the group gets one signal"

// units sorts the targets into units, in the targets' order. Grouping
// needs the pgid from /proc (Linux); where it cannot be read, or the pid
// is no longer the target's process, the target stays alone.
func (t *Terminator) units(targets []Target) []unit {
	byGroup := map[int][]int{}
	groupOf := make([]int, len(targets))
	self := syscall.Getpgrp()
	for i, tg := range targets {
		if tg.Group {
			continue
		}
		pgid, ticks, err := pgidOf(tg.ID.PID)
		if err != nil || ticks != tg.ID.StartTicks || pgid <= 1 || pgid == self {
			continue
		}
		groupOf[i] = pgid
		byGroup[pgid] = append(byGroup[pgid], i)
	}
	if len(byGroup) > 0 {
		want := map[int]bool{}
		for pgid := range byGroup {
			want[pgid] = true
		}
		live, err := groupMembers(want)
		for pgid, idx := range byGroup {
			if err != nil || !t.whole(targets, idx, live[pgid]) {
				for _, i := range idx {
					groupOf[i] = 0
				}
			}
		}
	}
	var us []unit
	done := map[int]bool{}
	for i := range targets {
		switch g := groupOf[i]; {
		case g == 0:
			us = append(us, unit{idx: []int{i}})
		case !done[g]:
			done[g] = true
			us = append(us, unit{pgid: g, idx: byGroup[g]})
		}
	}
	return us
}

// whole reports whether live, the live processes of a group, are all
// among targets[idx], each one's identity probing alive.
func (t *Terminator) whole(targets []Target, idx []int, live []member) bool {
	if len(live) == 0 {
		return false
	}
	for _, m := range live {
		found := false
		for _, i := range idx {
			id := targets[i].ID
			if id.PID == m.PID && id.StartTicks == m.StartTicks && t.Probe.Probe(id).Liveness == proc.Alive {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Plan lists the steps Terminate would take, without signalling.
func (t *Terminator) Plan(targets []Target, timeout time.Duration, force bool) []session.Step {
	steps := make([]session.Step, len(targets))
	for _, u := range t.units(targets) {
		to, note := "", ""
		if u.pgid != 0 {
			to, note = " to process group "+strconv.Itoa(u.pgid), wholeGroupNote
		}
		for _, i := range u.idx {
			tg := targets[i]
			if r := t.Probe.Probe(tg.ID); r.Liveness != proc.Alive {
				steps[i] = session.StepSkipped("nothing to signal", target(tg), tg.What+": "+r.Reason)
				continue
			}
			action := "SIGTERM" + to + ", then SIGKILL after " + timeout.String()
			if force {
				action = "SIGKILL" + to
			}
			steps[i] = session.StepPlanned(action, target(tg), tg.What+note)
		}
	}
	return steps
}

// Terminate sends SIGTERM (SIGKILL when force) to every target still
// alive, waits up to timeout for them to die, then SIGKILLs survivors. A
// Group target counts as dead only when no process of its group is left.
// Each signal is preceded by a probe of the exact identity. The steps are
// one per target, in order.
func (t *Terminator) Terminate(ctx context.Context, targets []Target, timeout time.Duration, force bool) []session.Step {
	poll := t.Poll
	if poll <= 0 {
		poll = 50 * time.Millisecond
	}
	steps := make([]session.Step, len(targets))
	first := syscall.SIGTERM
	if force {
		first = syscall.SIGKILL
	}
	us := t.units(targets)
	sent := map[int]bool{}
	for _, u := range us {
		t.deliver(targets, u, u.idx, first, steps)
		for _, i := range u.idx {
			if steps[i].Outcome == session.OutcomeDone {
				sent[i] = true
			}
		}
	}
	t.await(ctx, targets, sent, time.Now().Add(timeout), poll, steps, "; exited")
	if len(sent) == 0 {
		return steps
	}
	killed := t.killSurvivors(targets, us, sent, timeout, steps)
	// The wait for the SIGKILLed is short and bounded, and not cut short
	// by ctx: each of them ends up reported killed or still alive.
	t.await(context.Background(), targets, killed, time.Now().Add(killWait), poll, steps, "; killed")
	for i := range killed {
		what := "process"
		if targets[i].Group {
			what = "process group"
		}
		steps[i].Outcome, steps[i].Error = session.OutcomeFailed, fmt.Sprintf("%s still alive %s after SIGKILL", what, killWait)
	}
	return steps
}

// await waits until the targets in waiting are gone, the deadline passes
// or ctx ends, polling every poll. Each target found gone leaves waiting,
// its step's detail ending with note.
func (t *Terminator) await(ctx context.Context, targets []Target, waiting map[int]bool, deadline time.Time, poll time.Duration, steps []session.Step, note string) {
	for len(waiting) > 0 {
		for i := range waiting {
			if gone, why := t.gone(targets[i]); gone {
				steps[i].Detail += why + note
				delete(waiting, i)
			}
		}
		if len(waiting) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return
		}
		time.Sleep(poll)
	}
}

// killSurvivors SIGKILLs the targets still alive after the timeout, a
// group's survivors together when they are still all of it, and returns
// those the SIGKILL reached.
func (t *Terminator) killSurvivors(targets []Target, us []unit, alive map[int]bool, timeout time.Duration, steps []session.Step) map[int]bool {
	kill := make([]session.Step, len(targets))
	killed := map[int]bool{}
	for _, u := range us {
		var left []int
		for _, i := range u.idx {
			if alive[i] {
				left = append(left, i)
			}
		}
		if len(left) == 0 {
			continue
		}
		t.deliver(targets, u, left, syscall.SIGKILL, kill)
		for _, i := range left {
			steps[i].Action += ", SIGKILL after " + timeout.String()
			switch kill[i].Outcome {
			case session.OutcomeDone:
				killed[i] = true
			case session.OutcomeSkipped:
				// It died between the last look and the SIGKILL.
				steps[i].Detail += "; exited"
			default:
				steps[i].Outcome, steps[i].Error = kill[i].Outcome, "SIGKILL: "+kill[i].Error
			}
		}
	}
	return killed
}

// gone reports whether a target is dead: its identity no longer probes
// alive and, for a Group target, no process of its group is left. note
// says what could not be checked.
func (t *Terminator) gone(tg Target) (bool, string) {
	if t.Probe.Probe(tg.ID).Liveness == proc.Alive {
		return false, ""
	}
	if !tg.Group {
		return true, ""
	}
	empty, err := groupGone(tg.ID.PID, tg.ID.StartTicks)
	if err != nil {
		return true, "; leader exited, the rest of its group could not be checked: " + err.Error()
	}
	return empty, ""
}

// deliver sends sig for the targets idx of unit u, writing their steps. A
// group unit is signalled as one only if a fresh look still finds every
// live process of the group among idx, identities probed alive; otherwise
// each target is signalled alone.
func (t *Terminator) deliver(targets []Target, u unit, idx []int, sig syscall.Signal, steps []session.Step) {
	if u.pgid == 0 {
		for _, i := range idx {
			steps[i] = t.send(targets[i], sig)
		}
		return
	}
	live, err := groupMembers(map[int]bool{u.pgid: true})
	if err != nil || !t.whole(targets, idx, live[u.pgid]) {
		why := "its process group now holds a process that is not a target"
		if err != nil {
			why = err.Error()
		}
		for _, i := range idx {
			steps[i] = t.send(targets[i], sig)
			steps[i].Detail += "; signalled alone: " + why
		}
		return
	}
	serr := t.signal(-u.pgid, sig)
	for _, i := range idx {
		tg := targets[i]
		s := session.StepPlanned(sigName(sig)+" to process group "+strconv.Itoa(u.pgid), target(tg), tg.What+wholeGroupNote)
		isMember := false
		for _, m := range live[u.pgid] {
			isMember = isMember || (m.PID == tg.ID.PID && m.StartTicks == tg.ID.StartTicks)
		}
		switch {
		case !isMember:
			// Exited, or moved to another group since the look: its own
			// probe and signal decide.
			s = t.send(tg, sig)
		case serr != nil:
			s = s.Failed(serr)
		default:
			s = s.Done()
		}
		steps[i] = s
	}
}

// send probes the identity and signals it only if it is still that
// process. A Group target whose leader has exited is signalled while
// processes of its group are left: the group's number cannot be given to
// another group while one of its processes lives.
func (t *Terminator) send(tg Target, sig syscall.Signal) session.Step {
	s := session.StepPlanned(sigName(sig), target(tg), tg.What)
	pid := tg.ID.PID
	if tg.Group {
		pid = -pid
	}
	if r := t.Probe.Probe(tg.ID); r.Liveness != proc.Alive {
		if !tg.Group {
			return s.Skipped(tg.What + ": not signalled, " + r.Reason)
		}
		empty, err := groupGone(tg.ID.PID, tg.ID.StartTicks)
		if err != nil || empty {
			why := "no process of the group is left"
			if err != nil {
				why = err.Error()
			}
			return s.Skipped(tg.What + ": not signalled, " + r.Reason + "; " + why)
		}
		s.Detail += "; leader already exited, signalled the rest of its group"
	}
	if err := t.signal(pid, sig); err != nil {
		return s.Failed(err)
	}
	return s.Done()
}
