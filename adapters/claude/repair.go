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

	"github.com/sessiond/sessiond/adapters"
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
	boot, _ := a.host.BootID()
	v := &procView{host: a.host, boot: boot}
	var steps []adapters.Step
	for _, de := range ents {
		if ctx.Err() != nil {
			return steps, ctx.Err()
		}
		if !IsRegistryName(de.Name()) {
			continue
		}
		path := filepath.Join(dir, de.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			steps = append(steps, adapters.Step{Action: "remove registry entry", Target: path, Outcome: adapters.OutcomeFailed, Error: err.Error()})
			continue
		}
		e, err := ParseRegistry(b)
		if err != nil || e.SessionID != t.UpstreamID {
			continue
		}
		keys := keyFiles(ents, dir, e.PID)
		if _, alive := a.registryOwner(&e, v); alive {
			steps = append(steps, adapters.Step{Action: "keep registry entry", Target: path, Outcome: adapters.OutcomeSkipped,
				Detail: fmt.Sprintf("pid %d is alive: the entry is its own", e.PID)})
			continue
		}
		detail := fmt.Sprintf("pid %d is dead; the entry says %q", e.PID, e.Status)
		steps = append(steps, a.removeStep("remove registry entry", path, detail, apply, &e, v))
		for _, k := range keys {
			steps = append(steps, a.removeStep("remove token file (not read)", k, fmt.Sprintf("belongs to dead pid %d", e.PID), apply, &e, v))
		}
	}
	steps = append(steps, adapters.Step{Action: "leave transcript", Target: t.UpstreamID + ".jsonl", Outcome: adapters.OutcomeSkipped,
		Detail: "Claude drops a dangling tool call when the session is resumed; the transcript is never rewritten"})
	return steps, nil
}

// removeStep plans or applies one removal; applying re-probes the pid
// first, so an entry whose process came back (or a reused pid that now
// matches) is never removed.
func (a *Adapter) removeStep(action, path, detail string, apply bool, e *RegistryEntry, v *procView) adapters.Step {
	s := adapters.Step{Action: action, Target: path, Detail: detail, Outcome: adapters.OutcomePlanned}
	if !apply {
		return s
	}
	if _, alive := a.registryOwner(e, v); alive {
		s.Outcome, s.Detail = adapters.OutcomeSkipped, fmt.Sprintf("pid %d is alive again", e.PID)
		return s
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.Outcome, s.Error = adapters.OutcomeFailed, err.Error()
		return s
	}
	s.Outcome = adapters.OutcomeDone
	return s
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
