package e2e

import (
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/sessiond/sessiond/internal/testkit/copilottest"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// Format drift said out loud for Gemini CLI, Qwen Code, Pi and Copilot,
// through the built binaries on a real socket: each test seeds a home
// where a newer version of the agent wrote a line type and a status value
// sessiond does not know, with a live process owning the session as the
// adapter finds owners. Health (--json) names both under the version the
// agent's data names, counting the input once; the session carries
// format_drift; the counts survive a restart of the daemon; the session
// stays running while its owner lives, and is found dead once it dies.

// driftCase is one agent's seeded home.
type driftCase struct {
	agent, version, input string
	lineType, status      string
	// hooks: the agent takes hooks, so an unknown hook event is posted
	// (as the agent would, `sessionctl hook <agent>`) and named too.
	hooks bool
	// seed writes the agent's data for a session owned by a process it
	// starts (or owner, a plain process), and returns the session's id.
	seed func(t *testing.T, e *env) (upstream string, owner *exec.Cmd)
}

func TestFormatDriftGemini(t *testing.T) {
	runDriftCase(t, driftCase{agent: "gemini", version: "", input: "chat", lineType: "thought", status: "deferred",
		seed: func(t *testing.T, e *env) (string, *exec.Cmd) {
			folder := project(t, e)
			owner := namedOwner(t, e, "gemini", folder)
			root := filepath.Join(e.Home, ".gemini")
			writeJSON(t, filepath.Join(root, "projects.json"), map[string]any{"projects": map[string]string{folder: "proj"}})
			writeFile(t, filepath.Join(root, "tmp", "proj", ".project_root"), []byte(folder))
			const id = "9d1f0c2e-6a4b-4c8d-9e2f-0123456789ab"
			sum := sha256.Sum256([]byte(folder))
			now := time.Now().UTC()
			at := func(s int) string { return now.Add(time.Duration(s) * time.Millisecond).Format(time.RFC3339Nano) }
			lines := jsonLines(t,
				map[string]any{"sessionId": id, "projectHash": hex.EncodeToString(sum[:]), "startTime": at(0), "lastUpdated": at(0), "kind": "main"},
				map[string]any{"id": "u1", "timestamp": at(1), "type": "user", "content": []any{map[string]any{"text": "plan the release"}}},
				map[string]any{"id": "t1", "timestamp": at(2), "type": "thought", "content": "thinking"},
				map[string]any{"id": "g1", "timestamp": at(3), "type": "gemini", "content": "", "toolCalls": []any{map[string]any{
					"id": "c1", "name": "run_shell_command", "args": map[string]any{"command": "make"}, "status": "deferred", "timestamp": at(3)}}},
			)
			writeFile(t, filepath.Join(root, "tmp", "proj", "chats", "session-"+now.Format("2006-01-02T15-04")+"-"+id[:8]+".jsonl"), lines)
			return id, owner
		}})
}

func TestFormatDriftQwen(t *testing.T) {
	runDriftCase(t, driftCase{agent: "qwen", version: "0.24.4", input: "chat", lineType: "checkpoint", status: "deferred", hooks: true,
		seed: func(t *testing.T, e *env) (string, *exec.Cmd) {
			folder := project(t, e)
			owner, oid := daemontest.StartOwner(t)
			root := filepath.Join(e.Home, ".qwen")
			const id = "3e0c8a41-7d2b-4f6e-8a9c-0123456789ab"
			writeJSON(t, filepath.Join(root, "sessions", fmt.Sprintf("%d.json", oid.PID)), map[string]any{
				"schemaVersion": 1, "pid": oid.PID, "procStart": fmt.Sprintf("%s:%d", oid.BootID, oid.StartTicks),
				"sessionId": id, "cwd": folder, "name": "proj", "startedAt": time.Now().UnixMilli(), "qwenVersion": "0.24.4", "kind": "tui"})
			now := time.Now().UTC()
			rec := func(s int, typ string, more map[string]any) map[string]any {
				m := map[string]any{"uuid": fmt.Sprintf("r%d", s), "parentUuid": nil, "sessionId": id,
					"timestamp": now.Add(time.Duration(s) * time.Millisecond).Format(time.RFC3339Nano), "type": typ, "cwd": folder, "version": "0.24.4"}
				for k, v := range more {
					m[k] = v
				}
				return m
			}
			lines := jsonLines(t,
				rec(1, "user", map[string]any{"message": map[string]any{"role": "user", "parts": []any{map[string]any{"text": "plan the release"}}}}),
				rec(2, "checkpoint", nil),
				rec(3, "assistant", map[string]any{"message": map[string]any{"role": "model", "parts": []any{
					map[string]any{"functionCall": map[string]any{"id": "c1", "name": "run_shell_command", "args": map[string]any{"command": "make"}}}}}}),
				rec(4, "tool_result", map[string]any{"message": map[string]any{"role": "user", "parts": []any{
					map[string]any{"functionResponse": map[string]any{"id": "c1", "name": "run_shell_command", "response": map[string]any{"output": "ok"}}}}},
					"toolCallResult": map[string]any{"callId": "c1", "status": "deferred"}}),
			)
			writeFile(t, filepath.Join(root, "projects", strings.ReplaceAll(folder, "/", "-"), "chats", id+".jsonl"), lines)
			return id, owner
		}})
}

func TestFormatDriftPi(t *testing.T) {
	runDriftCase(t, driftCase{agent: "pi", version: "session format 3", input: "session file", lineType: "checkpoint", status: "paused",
		seed: func(t *testing.T, e *env) (string, *exec.Cmd) {
			folder := project(t, e)
			owner := namedOwner(t, e, "pi", folder)
			const id = "01a21fa1-58b3-71ff-b3ea-0123456789ab"
			now := time.Now().UTC()
			at := func(s int) string {
				return now.Add(time.Duration(s) * time.Millisecond).Format("2006-01-02T15:04:05.000Z")
			}
			entry := func(s int, typ string, more map[string]any) map[string]any {
				m := map[string]any{"type": typ, "id": fmt.Sprintf("%08x", s), "parentId": nil, "timestamp": at(s)}
				for k, v := range more {
					m[k] = v
				}
				return m
			}
			// The last turn (from the reply that ended it) holds both.
			lines := jsonLines(t,
				map[string]any{"type": "session", "version": 3, "id": id, "timestamp": at(0), "cwd": folder},
				entry(1, "model_change", map[string]any{"provider": "fake", "modelId": "m1"}),
				entry(2, "message", map[string]any{"message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "plan the release"}}}}),
				entry(3, "message", map[string]any{"message": map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": "hm"}}, "stopReason": "paused"}}),
				entry(4, "checkpoint", nil),
			)
			dir := filepath.Join(e.Home, ".pi", "agent", "sessions", "--"+strings.ReplaceAll(strings.TrimPrefix(folder, "/"), "/", "-")+"--")
			writeFile(t, filepath.Join(dir, strings.NewReplacer(":", "-", ".", "-").Replace(at(0))+"_"+id+".jsonl"), lines)
			return id, owner
		}})
}

func TestFormatDriftCopilot(t *testing.T) {
	runDriftCase(t, driftCase{agent: "copilot", version: "1.0.102", input: "event log", lineType: "session.thought_stream", status: "suspended",
		seed: func(t *testing.T, e *env) (string, *exec.Cmd) {
			folder := project(t, e)
			owner, oid := daemontest.StartOwner(t)
			s, err := copilottest.New(filepath.Join(e.Home, ".copilot"), "7c2e9a10-9be0-432f-a48a-06e04eb70ae6", folder, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			for _, err := range []error{s.Headless("Plan the release", "make", true), s.Workspace("Plan the release", s.At, s.At),
				s.Raw([]byte(`{"type":"session.thought_stream","data":{},"id":"d1","timestamp":"` + s.At.Format("2006-01-02T15:04:05.000Z") + `","parentId":null}`)),
				s.Shutdown("suspended")} {
				if err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.InUse(oid.PID); err != nil {
				t.Fatal(err)
			}
			return s.ID, owner
		}})
}

func runDriftCase(t *testing.T, c driftCase) {
	e := newEnv(t)
	id, owner := c.seed(t, e)
	d := e.StartDaemon()

	running := func(when string) {
		t.Helper()
		var s api.Session
		testenv.EventuallyOK(t, 10*time.Second, when+": the session running with format_drift", func() (bool, string) {
			var ok bool
			if s, ok = showSession(e, id); !ok {
				return false, "not found"
			}
			p := problem(s, session.ProblemFormatDrift)
			return s.Status == session.StatusRunning && p != nil, fmt.Sprintf("%s (%s) %+v", s.Status, s.StatusReason, s.Problems)
		})
		v := c.version
		if v == "" {
			v = "(version not written)"
		}
		p := problem(s, session.ProblemFormatDrift)
		for _, want := range []string{c.agent + " " + v, c.lineType, c.status, "approximate"} {
			if !strings.Contains(p.Detail, want) {
				t.Errorf("%s: format_drift %q lacks %q", when, p.Detail, want)
			}
		}
	}
	health := func(when string) {
		t.Helper()
		testenv.EventuallyOK(t, 10*time.Second, when+": health names the drift", func() (bool, string) {
			var h api.Health
			e.CtlJSON(&h, "health")
			got := map[string]api.Drift{}
			for _, a := range h.Adapters {
				if a.Name == c.agent {
					for _, d := range a.Drift {
						got[d.Kind] = d
					}
				}
			}
			lt, st := got["line_type"], got["status"]
			delete(got, "hook_event") // said, and forgotten with the daemon: hooks are read once
			ok := len(got) == 2 &&
				lt.Version == c.version && lt.Input == c.input && lt.Inputs == 1 && slices.Equal(lt.Values, []api.DriftValue{{Value: c.lineType, Inputs: 1}}) &&
				st.Version == c.version && st.Input == c.input && st.Inputs == 1 && slices.Equal(st.Values, []api.DriftValue{{Value: c.status, Inputs: 1}})
			return ok, fmt.Sprintf("%+v", got)
		})
	}
	running("first read")
	health("first read")
	out, _, code := e.Ctl("health")
	if want := fmt.Sprintf("1 unknown line type (%s) in 1 %s", c.lineType, c.input); code != 0 || !strings.Contains(out, want) {
		t.Errorf("health (exit %d) lacks %q:\n%s", code, want, out)
	}

	if c.hooks {
		hook := exec.Command(e.Sessionctl, "hook", c.agent)
		hook.Env = e.Environ()
		hook.Stdin = strings.NewReader(fmt.Sprintf(`{"session_id":%q,"hook_event_name":"FutureEvent","cwd":%q}`, id, filepath.Join(e.Home, "proj")))
		if out, err := hook.CombinedOutput(); err != nil {
			t.Fatalf("sessionctl hook %s: %v: %s", c.agent, err, out)
		}
		testenv.EventuallyOK(t, 5*time.Second, "the unknown hook event in health", func() (bool, string) {
			out, _, _ = e.Ctl("health")
			return strings.Contains(out, c.agent+" (version not written): 1 unknown hook event (FutureEvent) in 1 hooked session"), out
		})
		if s, _ := showSession(e, id); s.Status != session.StatusRunning {
			t.Errorf("after the unknown hook: %s (%s)", s.Status, s.StatusReason)
		}
	}

	// A restart: the counts are those saved, the session still runs.
	d.Cmd.Process.Signal(syscall.SIGTERM)
	<-d.Done
	e.StartDaemon()
	running("after a restart")
	health("after a restart")

	// Liveness is the owner's process alone.
	owner.Process.Signal(syscall.SIGKILL)
	owner.Wait()
	testenv.EventuallyOK(t, 15*time.Second, "the session found dead once its owner is", func() (bool, string) {
		s, ok := showSession(e, id)
		return ok && s.Status != session.StatusRunning, fmt.Sprintf("%s (%s)", s.Status, s.StatusReason)
	})
}

// showSession is `sessionctl show ID --json`, ok false while there is
// none.
func showSession(e *env, id string) (api.Session, bool) {
	var s api.Session
	out, _, code := e.Ctl("--json", "show", id)
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil {
		return api.Session{}, false
	}
	return s, true
}

// project makes the session's working folder.
func project(t *testing.T, e *env) string {
	folder := filepath.Join(e.Home, "proj")
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	return folder
}

// namedOwner starts a process whose argv[0] is name (a link to sleep),
// in folder, as the adapters that infer owners by directory see an agent;
// it is killed when the test ends.
func namedOwner(t *testing.T, e *env, name, folder string) *exec.Cmd {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(e.Dir, "bin", name)
	os.MkdirAll(filepath.Dir(bin), 0o755)
	if err := os.Symlink(sleep, bin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "300")
	cmd.Dir = folder
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// Its start must come before the data's writes (times are compared).
	if _, err := proc.NewHost().Identify(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	return cmd
}

func jsonLines(t *testing.T, vs ...any) []byte {
	t.Helper()
	var b []byte
	for _, v := range vs {
		l, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		b = append(append(b, l...), '\n')
	}
	return b
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, b)
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
