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
func (a *Adapter) PlanRepair(ctx context.Context, t adapters.RepairTarget) ([]adapters.Step, error) {
	return a.repair(ctx, t, false)
}

// ApplyRepair plans again and removes what is still dead, re-probing each
// pid just before its entry is removed.
func (a *Adapter) ApplyRepair(ctx context.Context, t adapters.RepairTarget) ([]adapters.Step, error) {
	return a.repair(ctx, t, true)
}

func (a *Adapter) repair(ctx context.Context, t adapters.RepairTarget, apply bool) ([]adapters.Step, error) {
	root := repairRoot(t)
	dir := filepath.Join(root, "sessions")
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read registry %s: %w", dir, err)
	}
	v := newProcView(nil, a.host, a.cfg.DefaultRoot, a.cfg.Home)
	var steps []adapters.Step
	for _, de := range ents {
		if ctx.Err() != nil {
			return steps, ctx.Err()
		}
		if !isRegistryName(de.Name()) {
			continue
		}
		path := filepath.Join(dir, de.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			steps = append(steps, adapters.Failed("remove registry entry", path, "", err))
			continue
		}
		e, err := parseRegistry(b)
		if err != nil || e.SessionID != t.UpstreamID {
			continue
		}
		keys := keyFiles(ents, dir, e.PID)
		dead, why := a.entryDead(&e, v)
		if !dead {
			steps = append(steps, adapters.Skipped("keep registry entry", path, why))
			continue
		}
		detail := fmt.Sprintf("%s; the entry says %q", why, e.Status)
		steps = append(steps, a.removeStep("remove registry entry", path, detail, apply, &e, v))
		for _, k := range keys {
			steps = append(steps, a.removeStep("remove token file (not read)", k, fmt.Sprintf("belongs to dead pid %d", e.PID), apply, &e, v))
		}
	}
	steps = append(steps, adapters.Skipped("leave transcript", t.UpstreamID+".jsonl",
		"Claude drops a dangling tool call when the session is resumed; the transcript is never rewritten"))
	return steps, nil
}

// removeStep plans or applies one removal; applying re-probes the pid
// first, so an entry whose process came back (or a reused pid that now
// matches) is never removed.
func (a *Adapter) removeStep(action, path, detail string, apply bool, e *registryEntry, v *procView) adapters.Step {
	s := adapters.Planned(action, path, detail)
	if !apply {
		return s
	}
	if dead, why := a.entryDead(e, v); !dead {
		return s.Skipped("no longer confirmed dead: " + why)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return s.Failed(err)
	}
	return s.Done()
}

// entryDead reports whether the owner a registry entry names is confirmed
// dead, by the tracker's identity probe, and says why either way. Anything
// short of a confirmed death keeps the entry: an entry of another machine
// or of an invisible PID namespace (never probed here), a probe that
// failed, and a live pid whose entry records no procStart to compare.
func (a *Adapter) entryDead(e *registryEntry, v *procView) (bool, string) {
	pl := v.locate(e)
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
