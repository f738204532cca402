package codex

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/session"
)

var _ adapters.Repairer = (*Adapter)(nil)

// Codex needs nothing written to resume a session its writer left mid
// turn, so a repair plans no change: each step says what is left and why.
// Checked on 0.169.0 (docs/agents/codex.md): `codex exec resume` of a
// session killed mid tool sends the model the dangling call with an
// "aborted" output Codex makes up itself, writes nothing of it to the
// rollout, and starts a new turn; its thread_turns row stays "inProgress",
// which sessiond never reads. The writer lock file a killed Codex leaves is
// taken again by the next writer; removing it could give a new writer and
// a late one two different files to lock.

// PlanRepair lists what a repair would do: nothing, with the reasons.
func (a *Adapter) PlanRepair(ctx context.Context, t adapters.RepairTarget) ([]session.Step, error) {
	return a.repairPlan(ctx, t)
}

// ApplyRepair is PlanRepair: there is nothing to carry out.
func (a *Adapter) ApplyRepair(ctx context.Context, t adapters.RepairTarget) ([]session.Step, error) {
	return a.repairPlan(ctx, t)
}

func (a *Adapter) repairPlan(ctx context.Context, t adapters.RepairTarget) ([]session.Step, error) {
	root := t.Root
	if root == "" {
		root = a.launchRoot()
	}
	path, err := a.rolloutPath(ctx, root, t)
	if err != nil {
		return nil, err
	}
	var steps []session.Step
	lock := filepath.Join(root, "thread-writer-locks", t.UpstreamID+".lock")
	if _, err := os.Stat(lock); err == nil {
		pid, _, _, err := a.lockHolder(lock, newLockTable(a.cfg.Host))
		if pid > 0 {
			return []session.Step{session.StepSkipped("repair", path,
				fmt.Sprintf("pid %d holds the writer lock %s: the session is being written, nothing is repaired under a live writer", pid, lock))}, nil
		}
		if err != nil {
			return []session.Step{session.StepSkipped("repair", path,
				fmt.Sprintf("cannot tell whether a live writer holds %s (%v): nothing is repaired under what may be a live writer", lock, err))}, nil
		}
		steps = append(steps, session.StepSkipped("keep stale writer lock", lock,
			"nobody holds it (its writer died); the next codex that resumes the session takes it again, and removing it could give a new writer and a late one different files to lock"))
	}
	tr, err := rolloutTurn(path)
	switch {
	case err != nil:
		return nil, fmt.Errorf("read rollout %s: %w", path, err)
	case len(tr.Pending) > 0:
		var names []string
		for _, c := range tr.Pending {
			names = append(names, c.Name+" "+c.ID)
		}
		steps = append(steps, session.StepSkipped("keep tool call without output", path,
			"left as written: "+strings.Join(names, ", ")+"; codex resume answers it to the model with an \"aborted\" output of its own and starts a new turn (Codex 0.169.0)"))
	case tr.Busy:
		steps = append(steps, session.StepSkipped("keep unfinished turn", path,
			"left as written: the turn "+tr.TurnID+" never ended; codex resume starts a new turn after it (Codex 0.169.0)"))
	}
	if len(steps) == 0 {
		steps = append(steps, session.StepSkipped("repair", path, "nothing to repair: the last turn ended and no writer lock was left"))
	}
	return steps, nil
}

// rolloutPath is the session's rollout: the input it was last seen in,
// else found by its id.
func (a *Adapter) rolloutPath(ctx context.Context, root string, t adapters.RepairTarget) (string, error) {
	if t.Source != "" && strings.Contains(filepath.Base(t.Source), t.UpstreamID) {
		if _, err := os.Stat(t.Source); err == nil {
			return t.Source, nil
		}
	}
	p, err := findRollout(ctx, root, t.UpstreamID)
	switch {
	case p != "":
		return p, nil
	case err != nil:
		return "", fmt.Errorf("look for the rollout of %s: %w", t.UpstreamID, err)
	}
	return "", fmt.Errorf("no rollout of %s under %s", t.UpstreamID, root)
}

// rolloutTurn reads the turn state at the end of the rollout at path. A
// compressed rollout is closed by definition: it has no turn in flight.
func rolloutTurn(path string) (turn, error) {
	if !strings.HasSuffix(path, ".jsonl") {
		return turn{Known: true}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return turn{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return turn{}, err
	}
	var res readResult
	if err := readTail(f, fi.Size(), defaultTail, &res); err != nil {
		return turn{}, err
	}
	return res.turn, nil
}
