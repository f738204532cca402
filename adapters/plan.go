package adapters

import (
	"context"
	"errors"

	"github.com/sessiond/sessiond/session"
)

// PlannedStep is a step of a plan together with the action that carries
// it out, so that one list is both what a dry run shows and what Apply
// does.
type PlannedStep struct {
	session.Step
	run func(context.Context) error
}

// Plan is a planned step whose action is run.
func Plan(action, target, detail string, run func(context.Context) error) PlannedStep {
	return PlannedStep{Step: session.StepPlanned(action, target, detail), run: run}
}

// DryRun lists a plan's steps as planned, running nothing.
func DryRun(plan []PlannedStep) []session.Step {
	var out []session.Step
	for _, p := range plan {
		out = append(out, p.Step)
	}
	return out
}

// Note is a step decided while planning (left alone, pending, failed to
// read): DryRun and Apply report it as it is, running nothing.
func Note(s session.Step) PlannedStep { return PlannedStep{Step: s} }

// Skip is what a step's action returns when it finds, at the last moment,
// that it must not act (the process came back, the data moved on): the
// step is reported skipped with detail, and the plan goes on.
func Skip(detail string) error { return skipError{detail} }

type skipError struct{ detail string }

func (e skipError) Error() string { return e.detail }

// Apply carries out a plan in order: a step whose action returns nil is
// done, one that returns Skip is skipped, one whose action returns another
// error is failed with it, and a note is reported as it is. The first
// failure stops the plan, and the steps after it are reported as not
// attempted, so the checklist still shows all of it. err is that first
// failure, nil when no step failed.
func Apply(ctx context.Context, plan []PlannedStep) (steps []session.Step, err error) {
	for i, p := range plan {
		if p.run == nil {
			steps = append(steps, p.Step)
			continue
		}
		err := p.run(ctx)
		var skip skipError
		switch {
		case err == nil:
			steps = append(steps, p.Done())
		case errors.As(err, &skip):
			steps = append(steps, p.Skipped(skip.detail))
		default:
			steps = append(steps, p.Failed(err))
			return append(steps, NotAttempted(plan[i+1:])...), err
		}
	}
	return steps, nil
}

// NotAttempted reports the steps of a plan that a failure before them
// stopped: skipped, their detail saying so (notes as they are).
func NotAttempted(plan []PlannedStep) []session.Step {
	var out []session.Step
	for _, p := range plan {
		if p.run == nil {
			out = append(out, p.Step)
			continue
		}
		out = append(out, p.Skipped("not attempted after the failure above"))
	}
	return out
}
