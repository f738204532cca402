package realagents

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/fakemodel"
	"github.com/sessiond/sessiond/session"
)

// The markers that tell the two conversations apart at the fake model.
const (
	supervisorMarker = "SUPERVISE-7c1"
	workerMarker     = "WORKER-JOB-7c1"
	// workerTool is the worker's tool: long enough that the supervisor's
	// wait finds the worker still busy.
	workerTool = `python3 -c "import time; time.sleep(8)"`
)

// toolResults are the results of every tool call the conversation carries,
// in order.
func toolResults(r *fakemodel.Request) []fakemodel.ToolResult {
	var out []fakemodel.ToolResult
	for _, m := range r.Messages {
		out = append(out, m.ToolResults...)
	}
	return out
}

func clipText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// firstUserText is the text of the conversation's first user message.
func firstUserText(r *fakemodel.Request) string {
	for _, m := range r.Messages {
		if m.Role == "user" && m.Text != "" {
			return m.Text
		}
	}
	return ""
}

// supervisorScript is the supervising model: list the sessions, pick the
// claude session that is not its own from the list's result, wait until
// it is stopped, then say what it saw. The worker runs its tool once.
func supervisorScript(t *testing.T, prefix string) fakemodel.Handler {
	return func(r *fakemodel.Request) (fakemodel.Reply, bool) {
		// The first prompt says whose conversation it is (the
		// supervisor's later carries the worker's title, in a result).
		text := firstUserText(r)
		results := toolResults(r)
		switch {
		case strings.Contains(text, workerMarker):
			if len(results) == 0 {
				return fakemodel.RunCommand(workerTool, "Run the worker's job", time.Minute), true
			}
			return fakemodel.Say("Worker done, marker WORKER-END."), true
		case strings.Contains(text, supervisorMarker):
			switch len(results) {
			case 0:
				return fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{Name: prefix + "list_sessions", Input: map[string]any{"agent": "claude"}}}}, true
			case 1:
				var l struct {
					Sessions []struct {
						ID   string `json:"id"`
						Self bool   `json:"self"`
					} `json:"sessions"`
				}
				if err := json.Unmarshal([]byte(results[0].Content), &l); err != nil {
					t.Errorf("list_sessions' result is not its JSON: %v: %s", err, results[0].Content)
					return fakemodel.Say("The list did not read."), true
				}
				for _, s := range l.Sessions {
					if !s.Self {
						return fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{Name: prefix + "wait_for_session",
							Input: map[string]any{"id": s.ID, "until": "stopped", "timeout_seconds": 120}}}}, true
					}
				}
				return fakemodel.Say("No other session to wait for."), true
			default:
				return fakemodel.Say("The worker is done, marker SUPERVISOR-END."), true
			}
		}
		return fakemodel.Reply{}, false
	}
}

// Real Claude Code as the MCP client of sessionctl mcp: a supervising
// `claude -p --mcp-config` (started outside sessiond, as a user would)
// calls list_sessions and then wait_for_session on a second, real Claude
// session that sessiond launched and tracks. The tool results that reach
// the model carry the worker's id and its final status, stopped, and the
// supervisor's own session, when sessiond has discovered it by then, is
// the one marked self.
func TestClaudeMCPSupervisor(t *testing.T) {
	bin := agentBin(t, claudeBinEnv, "@anthropic-ai/claude-code")
	w := newWorld(t)
	w.model.SetHandler(supervisorScript(t, "mcp__sessiond__"))
	w.startDaemon("--claude-bin", bin, "--grace", "5s")
	w.step("daemon ready")

	worker := w.launch("launch", "--agent", "claude", "--cwd", w.proj(), "--prompt", "Please run the job, marker "+workerMarker, "--", "--allowedTools", "Bash")
	w.waitSession(worker.Session.ID, 60*time.Second, "running and busy", func(s api.Session) bool {
		return s.Status == session.StatusRunning && s.Activity == session.ActivityBusy
	})
	w.step("worker busy")

	cfg := filepath.Join(w.Dir, "mcp.json")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"sessiond": map[string]any{
		"command": w.Sessionctl, "args": []string{"mcp", "--socket", w.Socket},
	}}})
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// The supervisor works in a directory of its own: in the worker's,
	// sessiond (as of this writing) may take the supervisor for the
	// owner of the worker's session once the worker exited (an owner
	// inferred by cwd), and the worker would never be stopped.
	supDir := filepath.Join(w.Home, "lead")
	if err := os.MkdirAll(supDir, 0o755); err != nil {
		t.Fatal(err)
	}
	sup, out := w.start("supervisor", supDir, bin, "-p", "Supervise the other session, marker "+supervisorMarker,
		"--mcp-config", cfg, "--allowedTools", "mcp__sessiond__list_sessions,mcp__sessiond__wait_for_session",
		"--output-format", "stream-json", "--verbose")
	// w.start reaps it: it is done when its pid is gone.
	w.waitFor(4*time.Minute, "the supervisor claude finished", func() (bool, string) {
		return syscall.Kill(sup.Process.Pid, 0) == syscall.ESRCH, tail(out.String(), 2000)
	})
	w.step("supervisor done")
	if !strings.Contains(out.String(), "SUPERVISOR-END") {
		t.Fatalf("the supervisor did not end its turn:\n%s", tail(out.String(), 4000))
	}

	// What reached the model: the last supervisor turn carries both
	// tool results.
	var last *fakemodel.Request
	for _, r := range w.model.Turns() {
		if strings.Contains(firstUserText(r), supervisorMarker) {
			last = r
		}
	}
	if last == nil || !strings.Contains(firstUserText(last), supervisorMarker) {
		t.Fatal("no supervisor turn reached the model")
	}
	results := toolResults(last)
	if len(results) != 2 {
		t.Fatalf("the supervisor's last turn carries %d tool results, want 2:\n%s", len(results), last.Text())
	}
	// The transcript as the model received it, tool calls and results.
	var tr strings.Builder
	for _, m := range last.Messages {
		if m.Text != "" && m.Role != "system" && !strings.HasPrefix(m.Text, "<system-reminder>") {
			fmt.Fprintf(&tr, "%s: %s\n", m.Role, clipText(m.Text, 200))
		}
		for _, c := range m.ToolCalls {
			in, _ := json.Marshal(c.Input)
			fmt.Fprintf(&tr, "%s: tool_use %s %s\n", m.Role, c.Name, in)
		}
		for _, r := range m.ToolResults {
			fmt.Fprintf(&tr, "%s: tool_result (is_error %v) %s\n", m.Role, r.IsError, clipText(r.Content, 900))
		}
	}
	t.Logf("the supervisor's conversation at the model:\n%s", tr.String())
	var list struct {
		Sessions []api.Session `json:"sessions"`
		Self     string        `json:"self"`
	}
	if results[0].IsError || json.Unmarshal([]byte(results[0].Content), &list) != nil {
		t.Fatalf("list_sessions' result: %+v", results[0])
	}
	found := false
	for _, s := range list.Sessions {
		if s.ID == worker.Session.ID {
			found = true
		}
		if s.ID == list.Self && s.PID != sup.Process.Pid {
			t.Errorf("self is %s, owned by pid %d, not the supervisor's pid %d", s.ID, s.PID, sup.Process.Pid)
		}
	}
	if !found {
		t.Fatalf("list_sessions' result lacks the worker %s: %s", worker.Session.ID, results[0].Content)
	}
	if list.Self != "" {
		t.Logf("the supervisor's own session %s was marked self", list.Self)
	}
	var waited struct {
		Session  api.Session `json:"session"`
		Reached  bool        `json:"reached"`
		TimedOut bool        `json:"timed_out"`
	}
	if results[1].IsError || json.Unmarshal([]byte(results[1].Content), &waited) != nil {
		t.Fatalf("wait_for_session's result: %+v", results[1])
	}
	if waited.Session.ID != worker.Session.ID || !waited.Reached || waited.TimedOut || waited.Session.Status != session.StatusStopped {
		t.Fatalf("wait_for_session's result: %s", results[1].Content)
	}
	if s := w.Show(worker.Session.ID); s.Status != session.StatusStopped {
		t.Fatalf("the worker is %s after the wait said stopped", s.Status)
	}
}
