package adapters

import (
	"context"
	"errors"
)

// Step is one step of a repair, abort, reap or stop: planned first (a dry
// run), then applied, each with its outcome, so the user sees a checklist.
type Step struct {
	// Action says what the step does ("remove registry entry", "SIGTERM").
	Action string `json:"action"`
	// Target is what it acts on (a path, a pid, a part id).
	Target string `json:"target"`
	Detail string `json:"detail,omitempty"`
	// Outcome is planned, done, skipped, pending or failed.
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
}

// Step outcomes.
const (
	OutcomePlanned = "planned"
	OutcomeDone    = "done"
	// OutcomeSkipped: nothing to do, or deliberately left alone (the
	// detail says why).
	OutcomeSkipped = "skipped"
	// OutcomePending: cannot be done now (e.g. a live process holds the
	// data); retried when that changes.
	OutcomePending = "pending"
	OutcomeFailed  = "failed"
)

// Planned is a step a dry run lists: what would be done.
func Planned(action, target, detail string) Step {
	return Step{Action: action, Target: target, Detail: detail, Outcome: OutcomePlanned}
}

// Done is a step carried out.
func Done(action, target, detail string) Step {
	return Step{Action: action, Target: target, Detail: detail, Outcome: OutcomeDone}
}

// Skipped is a step with nothing to do, or deliberately left alone: the
// detail says why.
func Skipped(action, target, detail string) Step {
	return Step{Action: action, Target: target, Detail: detail, Outcome: OutcomeSkipped}
}

// Pending is a step that cannot be done now: the detail says what it
// waits for.
func Pending(action, target, detail string) Step {
	return Step{Action: action, Target: target, Detail: detail, Outcome: OutcomePending}
}

// Failed is a step that was tried and failed with err.
func Failed(action, target, detail string, err error) Step {
	return Step{Action: action, Target: target, Detail: detail, Outcome: OutcomeFailed, Error: err.Error()}
}

// Done returns s carried out.
func (s Step) Done() Step {
	s.Outcome = OutcomeDone
	return s
}

// Failed returns s failed with err; its detail stays.
func (s Step) Failed(err error) Step {
	s.Outcome, s.Error = OutcomeFailed, err.Error()
	return s
}

// Skipped returns s left alone, detail saying why in place of its own.
func (s Step) Skipped(detail string) Step {
	s.Outcome, s.Detail = OutcomeSkipped, detail
	return s
}

// PlannedStep is a step of a plan together with the action that carries
// it out, so that one list is both what a dry run shows and what Apply
// does.
type PlannedStep struct {
	Step
	run func(context.Context) error
}

// Plan is a planned step whose action is run.
func Plan(action, target, detail string, run func(context.Context) error) PlannedStep {
	return PlannedStep{Step: Planned(action, target, detail), run: run}
}

// DryRun lists a plan's steps as planned, running nothing.
func DryRun(plan []PlannedStep) []Step {
	var out []Step
	for _, p := range plan {
		out = append(out, p.Step)
	}
	return out
}

// Note is a step decided while planning (left alone, pending, failed to
// read): DryRun and Apply report it as it is, running nothing.
func Note(s Step) PlannedStep { return PlannedStep{Step: s} }

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
func Apply(ctx context.Context, plan []PlannedStep) (steps []Step, err error) {
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
func NotAttempted(plan []PlannedStep) []Step {
	var out []Step
	for _, p := range plan {
		if p.run == nil {
			out = append(out, p.Step)
			continue
		}
		out = append(out, p.Skipped("not attempted after the failure above"))
	}
	return out
}
