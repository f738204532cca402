package e2e

import (
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
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/session"
)

// Format drift said out loud, through the built binaries on a real
// socket: a home where a newer Claude Code wrote a transcript line type
// and a registry status value sessiond does not know. Health names both,
// per version, counting each input once; the sessions read from that data
// carry format_drift; and liveness is untouched: the session whose owner
// lives stays running, the one whose owner is killed is found dead.
func TestFormatDriftReportedNeverFatal(t *testing.T) {
	e := newEnv(t)
	root := claudetest.NewRoot(t, filepath.Join(e.Home, ".claude"))
	cwd := filepath.Join(e.Home, "proj")
	os.MkdirAll(cwd, 0o755)
	const version = "2.1.340"
	newer := func(id string) *claudetest.Transcript {
		tr := claudetest.NewTranscript(id, cwd, time.Now().Add(-time.Minute))
		tr.Version = version
		tr.User("plan the release")
		tr.Add([]byte(fmt.Sprintf(`{"type":"thought-stream","sessionId":%q,"version":%q,"timestamp":%q}`, id, version, time.Now().UTC().Format(time.RFC3339Nano))))
		return tr
	}
	entry := func(pid int, id string) claudetest.Entry {
		en := claudetest.LiveEntry(t, pid, id, cwd, "pondering")
		en.Version = version
		return en
	}
	live, dying := claudetest.NewSessionID(), claudetest.NewSessionID()
	liveOwner, _ := daemontest.StartOwner(t)
	dyingOwner, _ := daemontest.StartOwner(t)
	for _, s := range []struct {
		id    string
		owner int
	}{{live, liveOwner.Process.Pid}, {dying, dyingOwner.Process.Pid}} {
		root.WriteTranscript(t, newer(s.id))
		root.WriteRegistry(t, entry(s.owner, s.id))
	}

	e.StartDaemon()
	for _, id := range []string{live, dying} {
		s := e.Show(id[:8])
		if s.Status != session.StatusRunning {
			t.Fatalf("%s with a live owner and data not understood: %s (%s)", id, s.Status, s.StatusReason)
		}
		p := problem(s, session.ProblemFormatDrift)
		if p == nil || !strings.Contains(p.Detail, "claude "+version) || !strings.Contains(p.Detail, "thought-stream") ||
			!strings.Contains(p.Detail, "pondering") || !strings.Contains(p.Detail, "approximate") {
			t.Fatalf("%s: format_drift %+v in %+v", id, p, s.Problems)
		}
	}

	// health, as structured data: each input counted once, by version.
	var h api.Health
	e.CtlJSON(&h, "health")
	drift := map[string]api.Drift{}
	for _, a := range h.Adapters {
		if a.Name == "claude" {
			for _, d := range a.Drift {
				drift[d.Kind+" "+d.Input] = d
			}
		}
	}
	lt, st := drift["line_type transcript"], drift["status registry entry"]
	if lt.Version != version || lt.Inputs != 2 || !slices.Equal(lt.Values, []api.DriftValue{{Value: "thought-stream", Inputs: 2}}) {
		t.Errorf("line types: %+v (all %+v)", lt, drift)
	}
	if st.Version != version || st.Inputs != 2 || !slices.Equal(st.Values, []api.DriftValue{{Value: "pondering", Inputs: 2}}) {
		t.Errorf("registry status: %+v (all %+v)", st, drift)
	}
	// health, as the user reads it.
	out, _, code := e.Ctl("health")
	for _, want := range []string{
		"claude " + version + ": 1 unknown line type (thought-stream) in 2 transcripts — activity may be approximate",
		"claude " + version + ": 1 unknown status value (pondering) in 2 registry entries — activity may be approximate",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("health (exit %d) lacks %q:\n%s", code, want, out)
		}
	}

	// A hook event no known version sends, posted as Claude Code would
	// (sessionctl hook claude, the payload on stdin): counted, said.
	hook := exec.Command(e.Sessionctl, "hook", "claude")
	hook.Env = e.Environ()
	hook.Stdin = strings.NewReader(fmt.Sprintf(`{"session_id":%q,"hook_event_name":"FutureEvent","cwd":%q}`, live, cwd))
	if out, err := hook.CombinedOutput(); err != nil {
		t.Fatalf("sessionctl hook claude: %v: %s", err, out)
	}
	testenv.EventuallyOK(t, 5*time.Second, "the unknown hook event in health", func() (bool, string) {
		out, _, _ = e.Ctl("health")
		return strings.Contains(out, "1 unknown hook event (FutureEvent) in 1 hooked session"), out
	})
	t.Logf("health:\n%s", out)

	// The transcripts grow (passes read what was appended): still counted
	// once each.
	claudetest.Append(t, root.TranscriptPath(cwd, live), []byte(fmt.Sprintf(`{"type":"thought-stream","sessionId":%q,"version":%q}`, live, version)))
	// Liveness is the owner's process alone.
	dyingOwner.Process.Signal(syscall.SIGKILL)
	dyingOwner.Wait()
	testenv.EventuallyOK(t, 5*time.Second, "the killed owner's session found dead", func() (bool, string) {
		s := e.Show(dying)
		// Interrupted: its prompt never got a reply.
		return s.Status == session.StatusInterrupted, fmt.Sprintf("%s (%s)", s.Status, s.StatusReason)
	})
	if s := e.Show(live); s.Status != session.StatusRunning {
		t.Fatalf("the live owner's session: %s (%s)", s.Status, s.StatusReason)
	}
	testenv.EventuallyOK(t, 5*time.Second, "the grown transcript counted once", func() (bool, string) {
		var h api.Health
		e.CtlJSON(&h, "health")
		for _, a := range h.Adapters {
			for _, d := range a.Drift {
				if a.Name == "claude" && d.Kind == "line_type" {
					return d.Inputs == 2 && d.Values[0].Inputs == 2, fmt.Sprintf("%+v", d)
				}
			}
		}
		return false, "no line_type drift"
	})
}

func problem(s api.Session, kind session.ProblemKind) *session.Problem {
	for i := range s.Problems {
		if s.Problems[i].Kind == kind {
			return &s.Problems[i]
		}
	}
	return nil
}
