package realagents

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/fakemodel"
	"github.com/sessiond/sessiond/session"
)

// `claude -p` in a PID namespace of its own, as in a
// container (`unshare -p -f --mount-proc`, where claude is the namespace's
// pid 1 and its registry entry's pidDomain names that namespace). sessiond
// finds its host pid through NSpid and tracks it running and busy with the
// host pid as owner; kill -9 of that host pid takes the whole namespace
// with it, and the session must go interrupted (its tool call was in
// flight) within seconds, not unknown ("no process of that namespace is
// visible from here").
func TestClaudeInPIDNamespaceKilled(t *testing.T) {
	bin := agentBin(t, claudeBinEnv, "@anthropic-ai/claude-code")
	unshare := nsUnshare(t)
	w := newWorld(t)
	w.model.SetHandler(markerScript(map[string]fakemodel.Reply{"NS-3c7": longJob("")}))
	w.startDaemon("--claude-bin", bin, "--grace", "5s")
	lw := w.watchLiveNeverDead()
	w.step("daemon ready")

	cmd, out := w.start("claude -p in a PID namespace", w.proj(), unshare, "-p", "-f", "--mount-proc",
		bin, "-p", "Run the long job, marker NS-3c7", "--output-format", "stream-json", "--verbose", "--allowedTools", "Bash")
	diag := func() string { return tail(out.String(), 2000) }
	hostPID, ns := w.nsChild(cmd.Process.Pid, diag)
	py := w.waitNSTool(60*time.Second, diag)
	up := py.Env["CLAUDE_CODE_SESSION_ID"]
	w.step("tool running")
	lw.claim("claude", up, hostPID)

	// What Claude writes in its namespace: its own pid (1), and a
	// pidDomain that names the namespace, not the daemon's.
	nsPID := nsInnermost(t, hostPID)
	reg, ok := readClaudeReg(w.claudeRoot(), nsPID)
	if !ok || reg.SessionID != up {
		ents, _ := filepath.Glob(filepath.Join(w.claudeRoot(), "sessions", "*"))
		t.Fatalf("no registry entry %d.json for session %s (found %v, %+v); the root's sessions/: %v", nsPID, up, ok, reg, ents)
	}
	t.Logf("claude host pid %d is pid %d of %s; registry entry: pidDomain %q procStart %q status %q kind %q",
		hostPID, nsPID, ns, reg.PIDDomain, reg.ProcStart, reg.Status, reg.Kind)
	if !strings.HasSuffix(reg.PIDDomain, ":"+ns) {
		t.Errorf("registry pidDomain %q does not name the namespace %s", reg.PIDDomain, ns)
	}
	if ticks, _ := procStart(hostPID); reg.ProcStart != strconv.FormatUint(ticks, 10) {
		t.Errorf("registry procStart %q, the host reads start ticks %d", reg.ProcStart, ticks)
	}

	s := w.waitUpstream(up, 15*time.Second, "running and busy", runningWith(session.ActivityBusy))
	w.checkOwner(s, hostPID, "claude (host pid)")
	if p := s.Problem(session.ProblemForeignPIDNamespace); p != nil {
		t.Errorf("a visible namespace is flagged: %+v", *p)
	}
	w.step("running/busy, owner the host pid")

	s = w.killInterrupted(s, hostPID, session.ProblemOrphanedToolCall, session.ProblemStaleBusyMarker)
	if s.PID != hostPID {
		t.Errorf("interrupted session names owner pid %d, want the host pid %d", s.PID, hostPID)
	}
	t.Logf("after kill -9: %s", sessionLine(s))
	// The kernel kills the rest of the namespace with its pid 1: a pass
	// may catch the tool still dying (orphan_processes), never after.
	s = w.waitSession(s.ID, 5*time.Second, "interrupted, nothing of the namespace left running", func(s api.Session) bool {
		return s.Status == session.StatusInterrupted && s.Problem(session.ProblemOrphanProcesses) == nil
	})
	if p := s.Problem(session.ProblemForeignPIDNamespace); p != nil {
		t.Errorf("the dead session is flagged: %+v", *p)
	}
	w.checkStaysInterrupted(s.ID, 2*time.Second)
	w.step("interrupted, the namespace's processes gone")
}

// The same where sessiond cannot prove a namespace gone: it reads a /proc
// mounted with hidepid=2 (its own mount namespace; still the initial PID
// namespace). Claude A, pid 1 of its namespace, is killed while sessiond
// runs: the host identity it was found at ends the session. sessiond is
// then kill -9ed, claude B (pid 2 of another namespace, under a shell:
// two claudes that are pid 1 of their namespaces write the same
// sessions/1.json) killed while it is down, and sessiond restarted: the
// record's owner, B's host identity, is the process the adapter can no
// longer place, and its death ends that session too. Neither may stay
// unknown.
func TestClaudeInPIDNamespaceUnprovable(t *testing.T) {
	bin := agentBin(t, claudeBinEnv, "@anthropic-ai/claude-code")
	unshare := nsUnshare(t)
	w := newWorld(t)
	w.hidePIDDaemon(unshare)
	w.model.SetHandler(markerScript(map[string]fakemodel.Reply{"NS-A": longJob("A"), "NS-B": longJob("B")}))
	args := []string{"--claude-bin", bin, "--grace", "5s"}
	d := w.startDaemon(args...)
	w.watchLiveNeverDead()
	w.step("daemon ready (/proc with hidepid=2)")

	claude := []string{bin, "-p", "", "--output-format", "stream-json", "--verbose", "--allowedTools", "Bash"}
	claudeTagged := func(tag string) []string {
		c := append([]string(nil), claude...)
		c[2] = "Run the long job, marker NS-" + tag
		return c
	}
	cmdA, outA := w.start("claude A, pid 1 of a PID namespace", w.proj(), append([]string{unshare, "-p", "-f", "--mount-proc"}, claudeTagged("A")...)...)
	cmdB, outB := w.start("claude B, pid 2 of a PID namespace", w.proj(), append([]string{unshare, "-p", "-f", "--mount-proc",
		"sh", "-c", `"$@"; exit $?`, "sh"}, claudeTagged("B")...)...)
	hostA, _ := w.nsChild(cmdA.Process.Pid, func() string { return tail(outA.String(), 2000) })
	shB, _ := w.nsChild(cmdB.Process.Pid, func() string { return tail(outB.String(), 2000) })
	var hostB int
	w.waitFor(10*time.Second, "claude B under its namespace's shell", func() (bool, string) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", shB, shB))
		if f := strings.Fields(string(b)); len(f) == 1 {
			hostB = atoi(f[0])
		}
		return hostB != 0, tail(outB.String(), 2000)
	})
	ups := map[string]string{}
	w.waitFor(60*time.Second, "both tools running", func() (bool, string) {
		for _, p := range procs(func(p procInfo) bool { return p.Env[markerEnv] == w.marker && isPython(p) }) {
			ups[p.Args[len(p.Args)-1]] = p.Env["CLAUDE_CODE_SESSION_ID"]
		}
		return ups["A"] != "" && ups["B"] != "", fmt.Sprint(ups)
	})
	if n := nsInnermost(t, hostB); n != 2 {
		t.Fatalf("claude B is pid %d of its namespace, want 2", n)
	}
	a := w.waitUpstream(ups["A"], 15*time.Second, "running and busy", runningWith(session.ActivityBusy))
	w.checkOwner(a, hostA, "claude A (host pid)")
	b := w.waitUpstream(ups["B"], 15*time.Second, "running and busy", runningWith(session.ActivityBusy))
	w.checkOwner(b, hostB, "claude B (host pid)")
	if !strings.Contains(b.OwnerEvidence, "pid 2 of PID namespace") {
		t.Errorf("B's owner evidence %q does not name its namespace's pid", b.OwnerEvidence)
	}
	w.step("both running/busy, owners the host pids")

	a = w.killInterrupted(a, hostA, session.ProblemOrphanedToolCall, session.ProblemStaleBusyMarker)
	t.Logf("A after kill -9: %s (%s)", a.Status, a.StatusReason)
	w.checkStaysInterrupted(a.ID, time.Second)

	d.Cmd.Process.Signal(syscall.SIGKILL)
	<-d.Done
	w.step("sessiond killed")
	killed := time.Now()
	syscall.Kill(hostB, syscall.SIGKILL)
	w.waitFor(10*time.Second, "claude B and its namespace gone", func() (bool, string) {
		return !alive(hostB) && !alive(shB), "still alive"
	})
	w.startDaemon(args...)
	w.step("sessiond restarted (ready after reconciliation)")
	// Its busy entry is no stale marker now: the adapter cannot tell it
	// from a live one out of sight (foreign_pid_namespace). The
	// transcript's open tool call is in flight.
	s, took := w.waitInterrupted(b.ID, killed, 20*time.Second, session.ProblemOrphanedToolCall)
	if s.PID != hostB {
		t.Errorf("B names owner pid %d, want its host pid %d", s.PID, hostB)
	}
	t.Logf("B, killed while sessiond was down: %s %s after the kill (%s), problems %v", s.Status, took.Round(time.Millisecond), s.StatusReason, problemKinds(s))
	w.checkStaysInterrupted(s.ID, 2*time.Second)
	if s := w.Show(a.ID); s.Status != session.StatusInterrupted {
		t.Errorf("A after the restart: %s", sessionLine(s))
	}
	w.step("B interrupted after the restart")
}

// hidePIDDaemon makes the world's sessiond run in a mount namespace of its
// own whose /proc is mounted again with hidepid=2: the same processes (it
// runs as root), but no proof that a namespace out of sight is gone.
func (w *world) hidePIDDaemon(unshare string) {
	w.t.Helper()
	if out, err := exec.Command(unshare, "-m", "--propagation", "private", "sh", "-c", "mount -t proc -o hidepid=2 proc /proc").CombinedOutput(); err != nil {
		skipLoudly(w.t, "PID NAMESPACE NOT TESTED: cannot mount /proc with hidepid=2 in a mount namespace: %v: %s", err, out)
	}
	script := filepath.Join(w.Dir, "sessiond-hidepid")
	body := "#!/bin/sh\nexec " + unshare + " -m --propagation private sh -c 'mount -t proc -o hidepid=2 proc /proc && exec \"$0\" \"$@\"' " + w.Sessiond + " \"$@\"\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		w.t.Fatal(err)
	}
	w.Sessiond = script
}

// nsUnshare is the unshare that can make a PID namespace here, or skips.
func nsUnshare(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("unshare")
	if err != nil {
		skipLoudly(t, "PID NAMESPACE NOT TESTED: unshare is not installed (util-linux)")
	}
	if out, err := exec.Command(p, "-p", "-f", "--mount-proc", "true").CombinedOutput(); err != nil {
		skipLoudly(t, "PID NAMESPACE NOT TESTED: unshare -p -f --mount-proc fails here (needs CAP_SYS_ADMIN): %v: %s", err, out)
	}
	return p
}

// nsChild waits for the process unshare forked into the new namespace and
// returns its host pid and namespace.
func (w *world) nsChild(unsharePID int, diag func() string) (int, string) {
	w.t.Helper()
	own, _ := os.Readlink("/proc/self/ns/pid")
	var pid int
	var ns string
	w.waitFor(10*time.Second, "unshare's child in a new PID namespace", func() (bool, string) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", unsharePID, unsharePID))
		for _, f := range strings.Fields(string(b)) {
			if link, err := os.Readlink("/proc/" + f + "/ns/pid"); err == nil && link != own {
				pid, ns = atoi(f), link
			}
		}
		return pid != 0, diag()
	})
	return pid, ns
}

// waitNSTool waits for the python3 tool of this world's claude (found by
// the world's marker: inside the namespace CLAUDE_PID names the
// namespace's pid).
func (w *world) waitNSTool(within time.Duration, diag func() string) procInfo {
	w.t.Helper()
	var py procInfo
	w.waitFor(within, "claude's python3 tool running", func() (bool, string) {
		for _, p := range procs(func(p procInfo) bool { return p.Env[markerEnv] == w.marker && isPython(p) }) {
			if p.Env["CLAUDE_CODE_SESSION_ID"] != "" {
				py = p
				return true, ""
			}
		}
		return false, diag()
	})
	return py
}

// nsInnermost is a process's pid in its own namespace (the last NSpid).
func nsInnermost(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(rest)
			return atoi(f[len(f)-1])
		}
	}
	t.Fatalf("no NSpid in /proc/%d/status", pid)
	return 0
}

// checkStaysInterrupted fails if the session leaves interrupted within d.
func (w *world) checkStaysInterrupted(id string, d time.Duration) {
	w.t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if s := w.Show(id); s.Status != session.StatusInterrupted {
			w.t.Fatalf("session %s left interrupted: %s", id, sessionLine(s))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
