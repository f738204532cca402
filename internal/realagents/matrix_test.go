package realagents

// The real usage matrix: each agent run the ways people run it,
// outside sessiond, asserting while it lives the exact status, activity and
// owner, and after kill -9 interrupted with its problems, with the
// invariant watch running throughout.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/fakemodel"
	"github.com/sessiond/sessiond/session"
)

// --- the model's script ---

// markerScript answers each conversation turn by a marker in the user's
// last prompt; a turn that carries a tool's result ends with a short text.
// Turns with no known marker get the fallback ("Done.").
func markerScript(replies map[string]fakemodel.Reply) fakemodel.Handler {
	return func(r *fakemodel.Request) (fakemodel.Reply, bool) {
		if n := len(r.Messages); n > 0 && len(r.Messages[n-1].ToolResults) > 0 {
			return fakemodel.Say("Done, marker TURN-END."), true
		}
		last := r.LastUserText()
		for marker, rep := range replies {
			if strings.Contains(last, marker) {
				return rep, true
			}
		}
		return fakemodel.Reply{}, false
	}
}

// longJob is the reply that runs the long tool, its command tagged so a
// test can tell whose python3 is whose.
func longJob(tag string) fakemodel.Reply {
	cmd := longTool
	if tag != "" {
		cmd += " " + tag
	}
	return fakemodel.RunCommand(cmd, "Run the long job", 10*time.Minute)
}

// --- sessions as the daemon reports them ---

// session asks the daemon for one session by id or upstream id; ok is false
// when it has none.
func (w *world) session(ref string) (api.Session, bool) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := api.NewClient(w.Socket).Session(ctx, ref)
	if api.IsNotFound(err) {
		return api.Session{}, false
	}
	if err != nil {
		w.t.Fatalf("GET session %s: %v", ref, err)
	}
	return *s, true
}

// sessions lists every session of an agent.
func (w *world) sessions(agent string) []api.Session {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := api.NewClient(w.Socket).Sessions(ctx, api.ListOptions{Agent: agent, All: true})
	if err != nil {
		w.t.Fatalf("list sessions: %v", err)
	}
	return l
}

// waitUpstream waits until the daemon has the upstream session and it
// satisfies cond.
func (w *world) waitUpstream(up string, within time.Duration, what string, cond func(api.Session) bool) api.Session {
	w.t.Helper()
	var s api.Session
	w.waitFor(within, "session "+up+": "+what, func() (bool, string) {
		var ok bool
		if s, ok = w.session(up); !ok {
			return false, "not found"
		}
		return cond(s), sessionLine(s)
	})
	return s
}

// sessionLine is a session on one line, for failure messages.
func sessionLine(s api.Session) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func runningWith(act session.Activity) func(api.Session) bool {
	return func(s api.Session) bool { return s.Status == session.StatusRunning && s.Activity == act }
}

// checkOwner fails the test unless the session's owner is exactly the
// process pid, with its start ticks as the test reads them. The scenario
// goes on: what follows shows what a wrong owner leads to.
func (w *world) checkOwner(s api.Session, pid int, what string) {
	w.t.Helper()
	ticks, ok := procStart(pid)
	if !ok {
		w.t.Fatalf("%s: the expected owner %d is not alive", what, pid)
	}
	if s.PID != pid || s.PIDStart != ticks {
		w.t.Errorf("%s: session %s owner pid %d start %d (%s; candidates %v), want %s pid %d start %d; the owner named is %q",
			what, s.ID, s.PID, s.PIDStart, s.OwnerEvidence, s.CandidatePIDs, what, pid, ticks, cmdline(s.PID))
	}
}

// --- Claude's files ---

// claudeReg is the part of a registry entry <root>/sessions/<pid>.json the
// tests read.
type claudeReg struct {
	PID        int    `json:"pid"`
	SessionID  string `json:"sessionId"`
	Cwd        string `json:"cwd"`
	ProcStart  string `json:"procStart"`
	Kind       string `json:"kind"`
	Entrypoint string `json:"entrypoint"`
	PIDDomain  string `json:"pidDomain"`
	Status     string `json:"status"`
	WaitingFor string `json:"waitingFor"`
	Tmux       string `json:"tmux"`
	JobID      string `json:"jobId"`
}

func readClaudeReg(root string, pid int) (claudeReg, bool) {
	var r claudeReg
	b, err := os.ReadFile(filepath.Join(root, "sessions", itoa(pid)+".json"))
	if err != nil || json.Unmarshal(b, &r) != nil {
		return r, false
	}
	return r, r.PID == pid
}

// worldEnv is the value of a variable in the world's environment.
func (w *world) worldEnv(key string) string {
	v := ""
	for _, kv := range w.Environ() {
		if val, ok := strings.CutPrefix(kv, key+"="); ok {
			v = val // the last one wins, as in exec
		}
	}
	return v
}

func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// seedClaudeHome writes what a person who already uses Claude Code has, so
// an interactive claude (and claude --bg) starts straight into its prompt:
// onboarding done, the projects trusted, the API key approved (Claude
// stores the key's last 20 characters), and settings that allow the long
// tool. Claude 2.1.328 defaults to auto mode, whose safety check runs on
// Anthropic's side: behind the fake model (as behind any gateway that does
// not pass it) a dialog stops every tool call, so the settings turn auto
// mode off as such users do.
func (w *world) seedClaudeHome(projects ...string) {
	w.t.Helper()
	key := strings.TrimSpace(w.worldEnv("ANTHROPIC_API_KEY"))
	if len(key) > 20 {
		key = key[len(key)-20:]
	}
	proj := map[string]any{}
	for _, p := range projects {
		proj[p] = map[string]any{"hasTrustDialogAccepted": true}
	}
	state := map[string]any{
		"hasCompletedOnboarding": true,
		"customApiKeyResponses":  map[string]any{"approved": []string{key}, "rejected": []string{}},
		"projects":               proj,
	}
	settings := map[string]any{"permissions": map[string]any{
		"disableAutoMode": "disable",
		"allow":           []string{"Bash(python3:*)"},
	}}
	if err := os.MkdirAll(w.claudeRoot(), 0o700); err != nil {
		w.t.Fatal(err)
	}
	for path, v := range map[string]any{filepath.Join(w.Home, ".claude.json"): state, filepath.Join(w.claudeRoot(), "settings.json"): settings} {
		b, _ := json.MarshalIndent(v, "", "  ")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			w.t.Fatal(err)
		}
	}
}

// waitClaudeTool waits until a python3 tool of the claude process pid runs
// and returns it.
func (w *world) waitClaudeTool(pid int, within time.Duration, diag func() string) procInfo {
	w.t.Helper()
	var py procInfo
	w.waitFor(within, fmt.Sprintf("claude %d's python3 tool running", pid), func() (bool, string) {
		for _, p := range claudeTools(pid) {
			if isPython(p) {
				py = p
				return true, ""
			}
		}
		return false, diag()
	})
	return py
}

// claudeBusyThenKilled is the common end of the Claude scenarios: the
// claude process pid, whose tool runs, is tracked running and busy with
// itself as owner; kill -9 makes the session interrupted with the orphaned
// tool call, the stale busy marker and the orphaned tool processes.
func (w *world) claudeBusyThenKilled(pid int, root string, diag func() string) api.Session {
	w.t.Helper()
	py := w.waitClaudeTool(pid, 60*time.Second, diag)
	up := py.Env["CLAUDE_CODE_SESSION_ID"]
	w.step("tool running")
	if reg, ok := readClaudeReg(root, pid); !ok || reg.SessionID != up {
		w.t.Fatalf("registry entry of %d under %s: %+v (found %v), the tool says session %s", pid, root, reg, ok, up)
	}
	s := w.waitUpstream(up, 15*time.Second, "running and busy", runningWith(session.ActivityBusy))
	w.checkOwner(s, pid, "claude")
	if s.Cwd != w.proj() || s.Agent != "claude" || s.Launched {
		w.t.Errorf("session %s: agent %s cwd %s launched %v", s.ID, s.Agent, s.Cwd, s.Launched)
	}
	if s.Resume == nil || s.Resume.Root != root {
		w.t.Errorf("session %s resume cursor %+v, want root %s", s.ID, s.Resume, root)
	}
	w.step("running/busy, owner the claude process")
	w.killInterrupted(s, pid, session.ProblemOrphanedToolCall, session.ProblemStaleBusyMarker, session.ProblemOrphanProcesses)
	s = w.Show(s.ID)
	if d := problemDetails(s, session.ProblemOrphanProcesses); !strings.Contains(d, "pid "+itoa(py.PID)+" ") {
		w.t.Errorf("orphan_processes %q does not name the orphaned python3 %d", d, py.PID)
	}
	return s
}

// killInterrupted kill -9s the owner pid and waits for the session to be
// interrupted with the problems, recorded within 2 s of the kill.
func (w *world) killInterrupted(s api.Session, pid int, kinds ...session.ProblemKind) api.Session {
	w.t.Helper()
	killed := time.Now()
	if err := syscallKill(pid); err != nil {
		w.t.Fatalf("kill -9 %d: %v", pid, err)
	}
	s, took := w.waitInterrupted(s.ID, killed, 2*time.Second, kinds...)
	w.t.Logf("%s: interrupted %s after kill -9 of %d (event time), problems %v", s.ID, took.Round(time.Millisecond), pid, problemKinds(s))
	w.step(fmt.Sprintf("killed %d: interrupted after %s", pid, took.Round(time.Millisecond)))
	return s
}
