package realagents

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
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

// userSays reports whether a user message's own text (not a tool's
// result) says marker: whose conversation a request is.
func userSays(r *fakemodel.Request, marker string) bool {
	for _, m := range r.Messages {
		if m.Role == "user" && strings.Contains(m.Text, marker) {
			return true
		}
	}
	return false
}

// resultJSON is the JSON a tool's result carries: Codex (0.171) puts
// "Wall time: … seconds\nOutput:\n" before an MCP tool's text.
func resultJSON(content string) []byte {
	if _, after, ok := strings.Cut(content, "Output:\n"); ok && strings.HasPrefix(content, "Wall time:") {
		content = after
	}
	return []byte(content)
}

// sessiondTool is the call of sessiond's tool as the agent offers it:
// Claude Code as mcp__sessiond__<tool>; Codex (0.171) as <tool> in the
// Responses API namespace mcp__sessiond. ok is false when it does not.
func sessiondTool(r *fakemodel.Request, tool string, input map[string]any) (fakemodel.ToolCall, bool) {
	for _, n := range r.Tools {
		switch {
		case n == "mcp__sessiond__"+tool:
			return fakemodel.ToolCall{Name: n, Input: input}, true
		case n == "mcp__sessiond":
			return fakemodel.ToolCall{Name: tool, Namespace: n, Input: input}, true
		}
	}
	return fakemodel.ToolCall{}, false
}

// resultOf is the result of the conversation's call of sessiond's tool
// (named mcp__sessiond__<tool>, or <tool> in Codex's namespace).
func resultOf(r *fakemodel.Request, tool string) (fakemodel.ToolResult, bool) {
	var id string
	for _, m := range r.Messages {
		for _, c := range m.ToolCalls {
			if c.Name == "mcp__sessiond__"+tool || c.Name == tool && c.Namespace == "mcp__sessiond" {
				id = c.ID
			}
		}
	}
	for _, res := range toolResults(r) {
		if id != "" && res.ID == id {
			return res, true
		}
	}
	return fakemodel.ToolResult{}, false
}

// called reports whether the conversation called the tool named name.
func called(r *fakemodel.Request, name string) bool {
	for _, m := range r.Messages {
		for _, c := range m.ToolCalls {
			if c.Name == name {
				return true
			}
		}
	}
	return false
}

// supervisorScript is the supervising model: list the sessions, pick the
// claude session that is not its own from the list's result, wait until
// it is stopped, then say what it saw. A Claude Code that defers its MCP
// tools (offers ToolSearch instead) is asked to load them first, as a
// model does. The worker runs its tool once.
func supervisorScript(t *testing.T) fakemodel.Handler {
	return func(r *fakemodel.Request) (fakemodel.Reply, bool) {
		switch {
		case userSays(r, supervisorMarker):
			listed, haveList := resultOf(r, "list_sessions")
			_, haveWait := resultOf(r, "wait_for_session")
			switch {
			case !haveList:
				call, ok := sessiondTool(r, "list_sessions", map[string]any{"agent": "claude"})
				switch {
				case ok:
					return fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{call}}, true
				case slices.Contains(r.Tools, "ToolSearch") && !called(r, "ToolSearch"):
					return fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{Name: "ToolSearch",
						Input: map[string]any{"query": "select:mcp__sessiond__list_sessions,mcp__sessiond__wait_for_session"}}}}, true
				}
				tb, _ := json.Marshal(r.Body["tools"])
				t.Errorf("the supervisor is not offered sessiond's list_sessions: tools %v\n%s", r.Tools, clipText(string(tb), 4000))
				return fakemodel.Say("No sessiond tools."), true
			case !haveWait:
				var l struct {
					Sessions []struct {
						ID   string `json:"id"`
						Self bool   `json:"self"`
					} `json:"sessions"`
				}
				if err := json.Unmarshal(resultJSON(listed.Content), &l); err != nil {
					t.Errorf("list_sessions' result is not its JSON: %v: %s", err, clipText(listed.Content, 600))
					return fakemodel.Say("The list did not read."), true
				}
				for _, s := range l.Sessions {
					if !s.Self {
						call, _ := sessiondTool(r, "wait_for_session", map[string]any{"id": s.ID, "until": "stopped", "timeout_seconds": 120})
						return fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{call}}, true
					}
				}
				return fakemodel.Say("No other session to wait for."), true
			default:
				return fakemodel.Say("The worker is done, marker SUPERVISOR-END."), true
			}
		case userSays(r, workerMarker):
			if len(toolResults(r)) == 0 {
				return fakemodel.RunCommand(workerTool, "Run the worker's job", time.Minute), true
			}
			return fakemodel.Say("Worker done, marker WORKER-END."), true
		}
		return fakemodel.Reply{}, false
	}
}

// startWorker launches the worker, a real headless Claude session
// sessiond tracks, and waits until it is busy in its tool.
func (w *world) startWorker() api.LaunchResponse {
	w.t.Helper()
	worker := w.launch("launch", "--agent", "claude", "--cwd", w.proj(), "--prompt", "Please run the job, marker "+workerMarker, "--", "--allowedTools", "Bash")
	w.waitSession(worker.Session.ID, 60*time.Second, "running and busy", func(s api.Session) bool {
		return s.Status == session.StatusRunning && s.Activity == session.ActivityBusy
	})
	w.step("worker busy")
	return worker
}

// supervisorDir is the directory the supervisor works in: the worker's,
// as a lead that launches a helper in its own folder does. The supervisor
// outlives the worker there, and must not be taken for the owner of the
// worker's ended session (an owner inferred by cwd): its registry entry
// names its own session.
func (w *world) supervisorDir() string { return w.proj() }

// checkSupervisor waits for the supervisor process to end its turn, then
// checks what reached the model: the last supervisor turn carries the
// results of list_sessions (the worker listed; the session marked self,
// if any, is the supervisor's) and wait_for_session (the worker reached
// stopped), as sessiond saw them.
func (w *world) checkSupervisor(sup *exec.Cmd, out *daemontest.Buffer, worker api.LaunchResponse) {
	t := w.t
	t.Helper()
	// w.start reaps it: it is done when its pid is gone.
	w.waitFor(4*time.Minute, "the supervisor finished", func() (bool, string) {
		return syscall.Kill(sup.Process.Pid, 0) == syscall.ESRCH, tail(out.String(), 2000)
	})
	w.step("supervisor done")
	if !strings.Contains(out.String(), "SUPERVISOR-END") {
		t.Fatalf("the supervisor did not end its turn:\n%s", tail(out.String(), 4000))
	}
	var last *fakemodel.Request
	for _, r := range w.model.Turns() {
		if userSays(r, supervisorMarker) {
			last = r
		}
	}
	if last == nil {
		t.Fatal("no supervisor turn reached the model")
	}
	// The transcript as the model received it, tool calls and results.
	var tr strings.Builder
	for _, m := range last.Messages {
		if m.Text != "" && m.Role != "system" && m.Role != "developer" && !strings.HasPrefix(m.Text, "<") {
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
	listed, ok1 := resultOf(last, "list_sessions")
	waitedFor, ok2 := resultOf(last, "wait_for_session")
	if !ok1 || !ok2 {
		t.Fatalf("the supervisor's last turn lacks a result: list_sessions %v, wait_for_session %v", ok1, ok2)
	}
	results := []fakemodel.ToolResult{listed, waitedFor}
	var list struct {
		Sessions []api.Session `json:"sessions"`
		Self     string        `json:"self"`
	}
	if results[0].IsError || json.Unmarshal(resultJSON(results[0].Content), &list) != nil {
		t.Fatalf("list_sessions' result: %+v", results[0])
	}
	found := false
	for _, s := range list.Sessions {
		if s.ID == worker.Session.ID {
			found = true
		}
		if s.ID == list.Self && !descendsFrom(s.PID, sup.Process.Pid) {
			t.Errorf("self is %s, owned by pid %d, not the supervisor (pid %d) or a child of it", s.ID, s.PID, sup.Process.Pid)
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
	if results[1].IsError || json.Unmarshal(resultJSON(results[1].Content), &waited) != nil {
		t.Fatalf("wait_for_session's result: %+v", results[1])
	}
	if waited.Session.ID != worker.Session.ID || !waited.Reached || waited.TimedOut || waited.Session.Status != session.StatusStopped {
		t.Fatalf("wait_for_session's result: %s", results[1].Content)
	}
	if s := w.Show(worker.Session.ID); s.Status != session.StatusStopped {
		t.Fatalf("the worker is %s after the wait said stopped", s.Status)
	}
}

// descendsFrom reports whether pid is anc or one of its descendants (a
// dead pid is not).
func descendsFrom(pid, anc int) bool {
	for hops := 0; pid > 1 && hops < 64; hops++ {
		if pid == anc {
			return true
		}
		p, ok := readProc(pid)
		if !ok {
			return false
		}
		pid = p.PPID
	}
	return false
}

// Real Claude Code as the MCP client of sessionctl mcp: a supervising
// `claude -p --mcp-config` (started outside sessiond, as a user would)
// calls list_sessions and then wait_for_session on a second, real Claude
// session that sessiond launched and tracks. The tool results that reach
// the model carry the worker's id and its final status, stopped.
func TestClaudeMCPSupervisor(t *testing.T) {
	bin := agentBin(t, claudeBinEnv, "@anthropic-ai/claude-code")
	w := newWorld(t)
	w.model.SetHandler(supervisorScript(t))
	w.startDaemon("--claude-bin", bin, "--grace", "5s")
	w.step("daemon ready")
	worker := w.startWorker()

	cfg := filepath.Join(w.Dir, "mcp.json")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"sessiond": map[string]any{
		"command": w.Sessionctl, "args": []string{"mcp", "--socket", w.Socket},
	}}})
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// Claude Code 2.1.332 connects MCP servers without blocking by
	// default; false makes -p wait for them before its first request.
	// (It may still defer their tools behind ToolSearch: the script
	// loads them then.)
	sup, out := w.startEnv("supervisor", w.supervisorDir(), []string{"MCP_CONNECTION_NONBLOCKING=false"}, bin, "-p", "Supervise the other session, marker "+supervisorMarker,
		"--mcp-config", cfg, "--allowedTools", "mcp__sessiond__list_sessions,mcp__sessiond__wait_for_session",
		"--output-format", "stream-json", "--verbose")
	w.checkSupervisor(sup, out, worker)
}

// The same through Codex: sessionctl mcp install codex writes
// [mcp_servers.sessiond] into its config.toml, and a supervising
// `codex exec` lists the sessions and waits for the real Claude worker.
func TestCodexMCPSupervisor(t *testing.T) {
	claude := agentBin(t, claudeBinEnv, "@anthropic-ai/claude-code")
	codex := agentBin(t, codexBinEnv, "@openai/codex")
	w := newWorld(t)
	w.writeCodexConfig()
	w.model.SetHandler(supervisorScript(t))
	w.startDaemon("--claude-bin", claude, "--codex-bin", codex, "--grace", "5s")
	w.step("daemon ready")
	if out, errs, code := w.Ctl("mcp", "install", "codex", "--socket", w.Socket); code != 0 {
		t.Fatalf("sessionctl mcp install codex: exit %d: %s %s", code, out, errs)
	}
	cfg, _ := os.ReadFile(filepath.Join(w.codexHome(), "config.toml"))
	if !strings.Contains(string(cfg), "[mcp_servers.sessiond]") {
		t.Fatalf("config.toml after the install:\n%s", cfg)
	}
	worker := w.startWorker()
	sup, out := w.start("supervisor", w.supervisorDir(), codex, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
		"Supervise the other session, marker "+supervisorMarker)
	w.checkSupervisor(sup, out, worker)
}

// What sessionctl mcp install writes, each real agent reads: claude mcp
// list connects to it, codex mcp list and opencode mcp list list it; after
// uninstall claude lists it no more.
func TestMCPInstallSeenByAgents(t *testing.T) {
	claude := agentBin(t, claudeBinEnv, "@anthropic-ai/claude-code")
	codex := agentBin(t, codexBinEnv, "@openai/codex")
	opencode := agentBin(t, opencodeBinEnv, "opencode-ai")
	w := newWorld(t)
	w.writeCodexConfig()
	w.startDaemon()
	for _, ag := range []string{"claude", "codex", "opencode"} {
		if out, errs, code := w.Ctl("mcp", "install", ag, "--socket", w.Socket); code != 0 {
			t.Fatalf("sessionctl mcp install %s: exit %d: %s %s", ag, code, out, errs)
		}
	}
	status, _, _ := w.Ctl("mcp", "status")
	t.Logf("sessionctl mcp status:\n%s", status)
	if strings.Count(status, "installed") != 3 {
		t.Errorf("status does not say installed for all three:\n%s", status)
	}
	list := func(bin string) string {
		cmd, out := w.start(filepath.Base(bin)+" mcp list", w.proj(), bin, "mcp", "list")
		w.waitFor(2*time.Minute, filepath.Base(bin)+" mcp list finished", func() (bool, string) {
			return syscall.Kill(cmd.Process.Pid, 0) == syscall.ESRCH, out.String()
		})
		return out.String()
	}
	for bin, want := range map[string]string{claude: "Connected", codex: "enabled", opencode: "connected"} {
		got := list(bin)
		t.Logf("%s mcp list:\n%s", filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(bin)))), got)
		if !strings.Contains(got, "sessiond") || !strings.Contains(got, want) || !strings.Contains(got, w.Sessionctl) {
			t.Errorf("%s mcp list does not show sessiond %s:\n%s", bin, want, got)
		}
	}
	if out, errs, code := w.Ctl("mcp", "uninstall", "claude"); code != 0 {
		t.Fatalf("sessionctl mcp uninstall claude: exit %d: %s %s", code, out, errs)
	}
	if got := list(claude); strings.Contains(got, "sessiond") {
		t.Errorf("claude mcp list after uninstall:\n%s", got)
	}
}
