package realagents

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/fakemodel"
	"github.com/sessiond/sessiond/session"
)

// askDatabase is the AskUserQuestion call the fake model makes, in the
// tool's input schema as Claude Code 2.1.328 offers it.
var askDatabase = fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{Name: "AskUserQuestion", Input: map[string]any{
	"questions": []any{map[string]any{
		"question": "Which database should I use?",
		"header":   "Database",
		"options": []any{
			map[string]any{"label": "Postgres", "description": "A server, for the shared setup"},
			map[string]any{"label": "SQLite", "description": "A file, for one machine"},
		},
		"multiSelect": false,
	}},
}}}}

// A question put to the user, on the path people take: an interactive
// claude in a tmux pane, no flags, no sessiond hooks installed. The
// session is waiting for a question, with the question's words, within a
// second of Claude's registry saying so; answered, it is idle again and
// the model got the answer.
func TestClaudeInteractiveQuestion(t *testing.T) {
	bin := agentBin(t, claudeBinEnv, "@anthropic-ai/claude-code")
	w := newWorld(t)
	w.seedClaudeHome(w.proj())
	var schemaOnce sync.Once
	script := markerScript(map[string]fakemodel.Reply{"ASK-5d2": askDatabase})
	w.model.SetHandler(func(r *fakemodel.Request) (fakemodel.Reply, bool) {
		schemaOnce.Do(func() {
			tools, _ := r.Body["tools"].([]any)
			for _, tl := range tools {
				if m, _ := tl.(map[string]any); m["name"] == "AskUserQuestion" {
					b, _ := json.Marshal(m["input_schema"])
					t.Logf("AskUserQuestion input_schema: %.600s", b)
				}
			}
		})
		return script(r)
	})
	w.startDaemon("--claude-bin", bin, "--grace", "5s")
	w.watchLiveNeverDead()
	p, cl, reg := w.startClaudeInPane(bin)
	up := reg.SessionID
	diag := func() string { return compactScreen(p.capture()) }
	w.waitUpstream(up, 15*time.Second, "running and idle at the prompt", runningWith(session.ActivityIdle))
	w.step("claude idle in the pane")

	p.typeLine("Ask me which database to use, marker ASK-5d2")
	var r claudeReg
	w.waitFor(30*time.Second, "claude's registry says waiting", func() (bool, string) {
		r, _ = readClaudeReg(w.claudeRoot(), cl.PID)
		return r.Status == "waiting", r.Status + " " + r.WaitingFor + "\n" + diag()
	})
	sawWaiting := time.Now()
	t.Logf("registry: status %q waitingFor %q", r.Status, r.WaitingFor)
	s := w.waitUpstream(up, time.Second, "waiting for the question, with its words", func(s api.Session) bool {
		wf := s.WaitingFor
		return s.Activity == session.ActivityWaiting && wf != nil && wf.Kind == session.WaitingQuestion &&
			wf.Question == "Which database should I use?"
	})
	t.Logf("waiting_for %+v from the %s, %s after the registry", *s.WaitingFor, s.ActivitySource, time.Since(sawWaiting).Round(time.Millisecond))
	// No sessiond hooks here: the agent's own data says it.
	if s.ActivitySource != session.SourceRegistry && s.ActivitySource != session.SourceTranscript {
		t.Errorf("activity_source %q, want the registry or the transcript", s.ActivitySource)
	}
	w.checkOwner(s, cl.PID, "interactive claude")
	w.step("waiting for a question, with its words")

	// Answer: the first option, then whatever Claude asks to submit.
	p.waitScreen(10*time.Second, "Postgres")
	t.Logf("the question on screen:\n%s", diag())
	var pressed time.Time
	w.waitFor(30*time.Second, "the answer reached the model and the turn ended", func() (bool, string) {
		r, _ := readClaudeReg(w.claudeRoot(), cl.PID)
		if r.Status == "waiting" && time.Since(pressed) > time.Second {
			p.keys("Enter")
			pressed = time.Now()
		}
		return r.Status == "idle", r.Status + "\n" + diag()
	})
	// Answered, the question is gone within a second of the registry's
	// idle.
	s = w.waitUpstream(up, time.Second, "idle again, waiting for input", func(s api.Session) bool {
		return runningWith(session.ActivityIdle)(s) && s.WaitingFor != nil && s.WaitingFor.Kind == session.WaitingInput
	})
	w.step("answered: running/idle")
	turns := w.model.Turns()
	last := turns[len(turns)-1]
	if !strings.Contains(last.Text(), "Postgres") {
		t.Errorf("the model's last turn does not carry the answer:\n%s", last.Text())
	}
}
