package session

// Step is one step of a repair, abort, reap or stop: planned first (a dry
// run), then applied, each with its outcome, so the user sees a checklist.
// Adapters and actions make steps and the API serves them, so the type
// lives here, below all of them.
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

// StepPlanned is a step a dry run lists: what would be done.
func StepPlanned(action, target, detail string) Step {
	return Step{Action: action, Target: target, Detail: detail, Outcome: OutcomePlanned}
}

// StepDone is a step carried out.
func StepDone(action, target, detail string) Step {
	return Step{Action: action, Target: target, Detail: detail, Outcome: OutcomeDone}
}

// StepSkipped is a step with nothing to do, or deliberately left alone:
// the detail says why.
func StepSkipped(action, target, detail string) Step {
	return Step{Action: action, Target: target, Detail: detail, Outcome: OutcomeSkipped}
}

// StepPending is a step that cannot be done now: the detail says what it
// waits for.
func StepPending(action, target, detail string) Step {
	return Step{Action: action, Target: target, Detail: detail, Outcome: OutcomePending}
}

// StepFailed is a step that was tried and failed with err.
func StepFailed(action, target, detail string, err error) Step {
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
