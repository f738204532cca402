package adapters

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/sessiond/sessiond/session"
)

// A plan stops at its first failure: the steps before it are done, the
// failing one carries the error, the rest are reported not attempted and
// never run.
func TestApplyStopsAtFirstFailure(t *testing.T) {
	var ran []string
	step := func(name string, err error) PlannedStep {
		return Plan("act "+name, name, "detail "+name, func(context.Context) error {
			ran = append(ran, name)
			return err
		})
	}
	boom := errors.New("boom")
	plan := []PlannedStep{step("a", nil), step("b", boom), step("c", nil)}

	if got, want := DryRun(plan), []session.Step{
		{Action: "act a", Target: "a", Detail: "detail a", Outcome: session.OutcomePlanned},
		{Action: "act b", Target: "b", Detail: "detail b", Outcome: session.OutcomePlanned},
		{Action: "act c", Target: "c", Detail: "detail c", Outcome: session.OutcomePlanned},
	}; !reflect.DeepEqual(got, want) || len(ran) != 0 {
		t.Fatalf("dry run %+v, ran %v", got, ran)
	}

	steps, err := Apply(context.Background(), plan)
	if err != boom {
		t.Errorf("err %v, want the failure's", err)
	}
	want := []session.Step{
		{Action: "act a", Target: "a", Detail: "detail a", Outcome: session.OutcomeDone},
		{Action: "act b", Target: "b", Detail: "detail b", Outcome: session.OutcomeFailed, Error: "boom"},
		{Action: "act c", Target: "c", Detail: "not attempted after the failure above", Outcome: session.OutcomeSkipped},
	}
	if !reflect.DeepEqual(steps, want) || !reflect.DeepEqual(ran, []string{"a", "b"}) {
		t.Fatalf("steps %+v, ran %v", steps, ran)
	}

	ran = nil
	if steps, err := Apply(context.Background(), plan[:1]); err != nil || len(steps) != 1 || steps[0].Outcome != session.OutcomeDone {
		t.Fatalf("%+v %v", steps, err)
	}
}

// TestApplyNotesAndSkips: a note is reported as it is, a Skip from an
// action skips that step and the plan goes on, a failure stops it (notes
// after the failure still reported as they are).
func TestApplyNotesAndSkips(t *testing.T) {
	ran := 0
	run := func(err error) func(context.Context) error {
		return func(context.Context) error { ran++; return err }
	}
	plan := []PlannedStep{
		Note(session.StepSkipped("keep", "a", "alive")),
		Plan("remove", "b", "dead", run(Skip("came back"))),
		Plan("remove", "c", "dead", run(nil)),
		Plan("remove", "d", "dead", run(errors.New("EPERM"))),
		Note(session.StepSkipped("leave", "e", "never rewritten")),
		Plan("remove", "f", "dead", run(nil)),
	}
	if got := DryRun(plan); got[0].Outcome != session.OutcomeSkipped || got[1].Outcome != session.OutcomePlanned || ran != 0 {
		t.Fatalf("dry run %+v ran %d", got, ran)
	}
	steps, err := Apply(context.Background(), plan)
	if err == nil || err.Error() != "EPERM" || ran != 3 {
		t.Fatalf("err %v ran %d, want EPERM after 3 actions", err, ran)
	}
	want := []struct{ target, outcome, detail string }{
		{"a", session.OutcomeSkipped, "alive"}, {"b", session.OutcomeSkipped, "came back"}, {"c", session.OutcomeDone, "dead"},
		{"d", session.OutcomeFailed, "dead"}, {"e", session.OutcomeSkipped, "never rewritten"},
		{"f", session.OutcomeSkipped, "not attempted after the failure above"},
	}
	if len(steps) != len(want) {
		t.Fatalf("steps %+v", steps)
	}
	for i, w := range want {
		if s := steps[i]; s.Target != w.target || s.Outcome != w.outcome || s.Detail != w.detail {
			t.Errorf("step %d = %+v, want %+v", i, s, w)
		}
	}
}
