package claude

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

var _ adapters.Repairer = (*Adapter)(nil)

// repairRoot is the config root of the session: the cursor's root, else
// derived from the project dir it was seen in (<root>/projects/<dir>).
func repairRoot(t adapters.RepairTarget) string {
	if t.Root != "" {
		return t.Root
	}
	if filepath.Base(filepath.Dir(t.Source)) == "projects" {
		return filepath.Dir(filepath.Dir(t.Source))
	}
	return t.Source
}

// PlanRepair lists what a repair would do: remove the registry entries
// naming the session whose process is dead (and that pid's .key files,
// found by name, never opened). Transcripts are left alone: Claude drops a
// dangling tool call when the session is resumed.
func (a *Adapter) PlanRepair(ctx context.Context, t adapters.RepairTarget) ([]session.Step, error) {
	plan, err := a.repairPlan(ctx, t)
	return adapters.DryRun(plan), err
}

// ApplyRepair plans again and removes what is still dead, re-probing each
// pid just before its entry is removed. A removal that fails stops the
// rest, which are reported not attempted.
func (a *Adapter) ApplyRepair(ctx context.Context, t adapters.RepairTarget) ([]session.Step, error) {
	plan, err := a.repairPlan(ctx, t)
	if err != nil {
		return adapters.DryRun(plan), err
	}
	steps, _ := adapters.Apply(ctx, plan) // a failure is in its step
	return steps, nil
}

// repairPlan lists the registry entries of the session: each one whose
// owner is confirmed dead is planned for removal with its .key files; the
// others are kept, each with why.
func (a *Adapter) repairPlan(ctx context.Context, t adapters.RepairTarget) ([]adapters.PlannedStep, error) {
	root := repairRoot(t)
	dir := filepath.Join(root, "sessions")
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read registry %s: %w", dir, err)
	}
	v := newProcView(nil, a.host, a.cfg.DefaultRoot, a.cfg.Home)
	var plan []adapters.PlannedStep
	for _, de := range ents {
		if ctx.Err() != nil {
			return plan, ctx.Err()
		}
		if !isRegistryName(de.Name()) {
			continue
		}
		path := filepath.Join(dir, de.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			plan = append(plan, adapters.Note(session.StepFailed("remove registry entry", path, "", err)))
			continue
		}
		e, err := parseRegistry(b)
		if err != nil || e.SessionID != t.UpstreamID {
			continue
		}
		dead, why := a.entryDead(&e, v)
		if !dead {
			plan = append(plan, adapters.Note(session.StepSkipped("keep registry entry", path, why)))
			continue
		}
		detail := fmt.Sprintf("%s; the entry says %q", why, e.Status)
		plan = append(plan, adapters.Plan("remove registry entry", path, detail, a.removeIfDead(path, &e, v)))
		for _, k := range keyFiles(ents, dir, e.PID) {
			plan = append(plan, adapters.Plan("remove token file (not read)", k,
				fmt.Sprintf("belongs to dead pid %d", e.PID), a.removeIfDead(k, &e, v)))
		}
	}
	plan = append(plan, adapters.Note(session.StepSkipped("leave transcript", t.UpstreamID+".jsonl",
		"Claude drops a dangling tool call when the session is resumed; the transcript is never rewritten")))
	return plan, nil
}

// removeIfDead removes path once the entry's pid is probed again and
// still confirmed dead, so an entry whose process came back (or a reused
// pid that now matches) is never removed.
func (a *Adapter) removeIfDead(path string, e *registryEntry, v *procView) func(context.Context) error {
	return func(context.Context) error {
		if dead, why := a.entryDead(e, v); !dead {
			return adapters.Skip("no longer confirmed dead: " + why)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
}

// entryDead reports whether the owner a registry entry names is confirmed
// dead, by the tracker's identity probe, and says why either way. Anything
// short of a confirmed death keeps the entry: an entry of another machine
// or of an invisible PID namespace (never probed here), a probe that
// failed, and a live pid whose entry records no procStart to compare.
func (a *Adapter) entryDead(e *registryEntry, v *procView) (bool, string) {
	pl := v.locate(e, proc.Identity{})
	switch {
	case pl.dead():
		return true, pl.detail
	case pl.problem != "":
		return false, pl.detail
	}
	boot, err := a.host.BootID()
	if err != nil {
		return false, fmt.Sprintf("cannot probe pid %d: %v", pl.pid, err)
	}
	if ticks, ok := procStartTicks(e.ProcStart); ok {
		r := a.host.Probe(proc.Identity{BootID: boot, PID: pl.pid, StartTicks: ticks})
		switch r.Liveness {
		case proc.Dead:
			return true, r.Reason
		case proc.Alive:
			return false, fmt.Sprintf("pid %d is alive: the entry is its own", pl.pid)
		}
		return false, "cannot confirm the owner is dead: " + r.Reason
	}
	// No procStart (older versions): the live process at the pid, if any,
	// is the entry's own unless it started after the entry was written.
	live, err := a.host.Identify(pl.pid)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return true, fmt.Sprintf("pid %d does not exist", pl.pid)
	case err != nil:
		return false, fmt.Sprintf("cannot confirm pid %d is dead: %v", pl.pid, err)
	}
	if r := a.host.Probe(live); r.Liveness != proc.Alive {
		return r.Liveness == proc.Dead, r.Reason
	}
	if st, err := a.host.StartTime(live); err == nil && !e.StartedAt.IsZero() && st.After(e.StartedAt.Add(2*time.Second)) {
		return true, fmt.Sprintf("pid %d was reused: the process there started at %s, after the entry (%s)",
			pl.pid, st.UTC().Format(time.RFC3339), e.StartedAt.UTC().Format(time.RFC3339))
	}
	return false, fmt.Sprintf("pid %d is alive and the entry records no procStart: it may be its own", pl.pid)
}

// keyFiles returns <pid>.<hash>.key names in the registry dir: found by
// name only, never opened (they hold a secret token).
func keyFiles(ents []os.DirEntry, dir string, pid int) []string {
	prefix := strconv.Itoa(pid) + "."
	var out []string
	for _, de := range ents {
		n := de.Name()
		if strings.HasPrefix(n, prefix) && strings.HasSuffix(n, ".key") {
			out = append(out, filepath.Join(dir, n))
		}
	}
	return out
}
