package session

import (
	"encoding/json"
	"errors"
	"testing"
)

// The constructors fill a Step as the literals they replace did: the API
// serializes Step, so its JSON must not change.
func TestStepConstructorsJSON(t *testing.T) {
	for _, tc := range []struct {
		s    Step
		want string
	}{
		{StepPlanned("a", "t", ""), `{"action":"a","target":"t","outcome":"planned"}`},
		{StepDone("a", "t", "d"), `{"action":"a","target":"t","detail":"d","outcome":"done"}`},
		{StepSkipped("a", "t", "d"), `{"action":"a","target":"t","detail":"d","outcome":"skipped"}`},
		{StepPending("a", "t", "d"), `{"action":"a","target":"t","detail":"d","outcome":"pending"}`},
		{StepFailed("a", "t", "", errors.New("e")), `{"action":"a","target":"t","outcome":"failed","error":"e"}`},
		{StepPlanned("a", "t", "d").Failed(errors.New("e")), `{"action":"a","target":"t","detail":"d","outcome":"failed","error":"e"}`},
		{StepPlanned("a", "t", "d").Skipped("why"), `{"action":"a","target":"t","detail":"why","outcome":"skipped"}`},
		{StepPlanned("a", "t", "d").Done(), `{"action":"a","target":"t","detail":"d","outcome":"done"}`},
	} {
		b, err := json.Marshal(tc.s)
		if err != nil || string(b) != tc.want {
			t.Errorf("%+v: %s %v, want %s", tc.s, b, err, tc.want)
		}
	}
}
