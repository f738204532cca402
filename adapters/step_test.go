package adapters

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
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

	if got, want := DryRun(plan), []Step{
		{Action: "act a", Target: "a", Detail: "detail a", Outcome: OutcomePlanned},
		{Action: "act b", Target: "b", Detail: "detail b", Outcome: OutcomePlanned},
		{Action: "act c", Target: "c", Detail: "detail c", Outcome: OutcomePlanned},
	}; !reflect.DeepEqual(got, want) || len(ran) != 0 {
		t.Fatalf("dry run %+v, ran %v", got, ran)
	}

	steps, err := Apply(context.Background(), plan)
	if err != boom {
		t.Errorf("err %v, want the failure's", err)
	}
	want := []Step{
		{Action: "act a", Target: "a", Detail: "detail a", Outcome: OutcomeDone},
		{Action: "act b", Target: "b", Detail: "detail b", Outcome: OutcomeFailed, Error: "boom"},
		{Action: "act c", Target: "c", Detail: "not attempted after the failure above", Outcome: OutcomeSkipped},
	}
	if !reflect.DeepEqual(steps, want) || !reflect.DeepEqual(ran, []string{"a", "b"}) {
		t.Fatalf("steps %+v, ran %v", steps, ran)
	}

	ran = nil
	if steps, err := Apply(context.Background(), plan[:1]); err != nil || len(steps) != 1 || steps[0].Outcome != OutcomeDone {
		t.Fatalf("%+v %v", steps, err)
	}
}

// The constructors fill a Step as the literals they replace did: the API
// serializes Step, so its JSON must not change.
func TestStepConstructorsJSON(t *testing.T) {
	for _, tc := range []struct {
		s    Step
		want string
	}{
		{Planned("a", "t", ""), `{"action":"a","target":"t","outcome":"planned"}`},
		{Done("a", "t", "d"), `{"action":"a","target":"t","detail":"d","outcome":"done"}`},
		{Skipped("a", "t", "d"), `{"action":"a","target":"t","detail":"d","outcome":"skipped"}`},
		{Pending("a", "t", "d"), `{"action":"a","target":"t","detail":"d","outcome":"pending"}`},
		{Failed("a", "t", "", errors.New("e")), `{"action":"a","target":"t","outcome":"failed","error":"e"}`},
		{Planned("a", "t", "d").Failed(errors.New("e")), `{"action":"a","target":"t","detail":"d","outcome":"failed","error":"e"}`},
		{Planned("a", "t", "d").Skipped("why"), `{"action":"a","target":"t","detail":"why","outcome":"skipped"}`},
		{Planned("a", "t", "d").Done(), `{"action":"a","target":"t","detail":"d","outcome":"done"}`},
	} {
		b, err := json.Marshal(tc.s)
		if err != nil || string(b) != tc.want {
			t.Errorf("%+v: %s %v, want %s", tc.s, b, err, tc.want)
		}
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
		Note(Skipped("keep", "a", "alive")),
		Plan("remove", "b", "dead", run(Skip("came back"))),
		Plan("remove", "c", "dead", run(nil)),
		Plan("remove", "d", "dead", run(errors.New("EPERM"))),
		Note(Skipped("leave", "e", "never rewritten")),
		Plan("remove", "f", "dead", run(nil)),
	}
	if got := DryRun(plan); got[0].Outcome != OutcomeSkipped || got[1].Outcome != OutcomePlanned || ran != 0 {
		t.Fatalf("dry run %+v ran %d", got, ran)
	}
	steps, err := Apply(context.Background(), plan)
	if err == nil || err.Error() != "EPERM" || ran != 3 {
		t.Fatalf("err %v ran %d, want EPERM after 3 actions", err, ran)
	}
	want := []struct{ target, outcome, detail string }{
		{"a", OutcomeSkipped, "alive"}, {"b", OutcomeSkipped, "came back"}, {"c", OutcomeDone, "dead"},
		{"d", OutcomeFailed, "dead"}, {"e", OutcomeSkipped, "never rewritten"},
		{"f", OutcomeSkipped, "not attempted after the failure above"},
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
