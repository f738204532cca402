package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/agents"
	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/lib/buildinfo"
	"github.com/sessiond/sessiond/session"
)

func ids(ss []api.Session) string {
	var out []string
	for _, s := range ss {
		out = append(out, s.ID+" "+string(s.Status))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// --json prints the API's objects: ls a SessionList, show a Session,
// health a Health, version both versions, an action its ActionResult.
func TestJSONOutput(t *testing.T) {
	w := newWorld(t)

	var list api.SessionList
	ctlJSON(t, &list, "ls")
	if got, want := ids(list.Sessions), runningID+" running, "+victimID+" running"; got != want {
		t.Errorf("ls: %s, want %s", got, want)
	}
	ctlJSON(t, &list, "ls", "--all")
	if got, want := ids(list.Sessions), runningID+" running, "+stoppedID+" stopped, "+victimID+" running"; got != want {
		t.Errorf("ls --all: %s, want %s", got, want)
	}

	var s api.Session
	ctlJSON(t, &s, "show", "5e55000000a")
	if s.ID != runningID || s.Agent != "claude" || s.Status != session.StatusRunning || s.PID != w.owner.PID ||
		s.Cwd != w.proj || s.UpstreamID != "11111111-2222-4333-8444-555555555555" {
		t.Errorf("show: %+v", s)
	}

	var h api.Health
	ctlJSON(t, &h, "health")
	if h.Socket != w.Socket || h.PID == 0 || h.PID == os.Getpid() || h.Sessions["running"] != 2 || h.Sessions["stopped"] != 1 || len(h.Adapters) != len(agents.Names()) {
		t.Errorf("health: %+v", h)
	}

	var v map[string]string
	ctlJSON(t, &v, "version")
	if v["sessionctl"] != buildinfo.Version(version) || v["sessiond"] != h.Version || len(v) != 2 {
		t.Errorf("version: %v, want sessionctl %s and sessiond %s", v, buildinfo.Version(version), h.Version)
	}

	var res api.ActionResult
	ctlJSON(t, &res, "repair", stoppedID)
	if res.Action != "repair" || res.Applied || res.Session.ID != stoppedID || len(res.Steps) == 0 || !strings.HasPrefix(res.Summary, "repair (dry run)") {
		t.Errorf("repair: %+v", res)
	}
	for _, action := range []string{"abort", "reap"} {
		res = api.ActionResult{}
		ctlJSON(t, &res, action, stoppedID)
		if res.Action != action || res.Session.ID != stoppedID || len(res.Steps) == 0 || res.Summary == "" {
			t.Errorf("%s: %+v", action, res)
		}
	}
	res = api.ActionResult{}
	ctlJSON(t, &res, "stop", victimID, "--timeout", "2s")
	if res.Action != "stop" || !res.Applied || len(res.Steps) != 1 || res.Steps[0].Outcome != session.OutcomeDone ||
		res.Session.ID != victimID || res.Session.Status != session.StatusStopped {
		t.Errorf("stop: %+v", res)
	}

	// events --json: one indented object per event, in order.
	out, errs, code := ctl("--json", "events")
	if code != exitOK {
		t.Fatalf("events: exit %d: %s", code, errs)
	}
	evs := decodeEvents(t, out)
	created := map[string]bool{}
	var stopped bool
	for i, ev := range evs {
		if i > 0 && ev.Seq <= evs[i-1].Seq {
			t.Errorf("event %d after %d", ev.Seq, evs[i-1].Seq)
		}
		if ev.Type == session.EventCreated {
			created[ev.SessionID] = true
		}
		if ev.SessionID == victimID && ev.Type == session.EventAction && strings.HasPrefix(ev.Reason, "stop") {
			stopped = true
		}
	}
	if !created[runningID] || !created[stoppedID] || !created[victimID] || !stopped {
		t.Errorf("events: created %v, stop recorded %v:\n%s", created, stopped, out)
	}
}

func decodeEvents(t *testing.T, out string) []api.Event {
	t.Helper()
	var evs []api.Event
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var ev api.Event
		if err := dec.Decode(&ev); err == io.EOF {
			return evs
		} else if err != nil {
			t.Fatalf("events: %v\n%s", err, out)
		}
		evs = append(evs, ev)
	}
}

// launch --json and resume --json print the LaunchResponse: the launched
// session, its log; the resume continues the same upstream conversation
// under the same id.
func TestLaunchAndResumeJSON(t *testing.T) {
	w := newWorld(t)
	var l api.LaunchResponse
	ctlJSON(t, &l, "launch", "--agent", "claude", "--cwd", w.proj, "--prompt", "list the files")
	if s := l.Session; !s.Launched || s.Agent != "claude" || s.PID == 0 || s.UpstreamID == "" || s.Cwd != w.proj || !strings.HasPrefix(l.LogPath, w.StateDir) {
		t.Fatalf("launch: %+v", l)
	}
	id := l.Session.ID
	stoppedWithCursor := func() (bool, string) {
		var s api.Session
		ctlJSON(t, &s, "show", id)
		return s.Status == session.StatusStopped && s.Resume != nil, fmt.Sprintf("%s, cursor %+v", s.Status, s.Resume)
	}
	testenv.EventuallyOK(t, 5*time.Second, "the launched session stopped with a resume cursor", stoppedWithCursor)

	var r api.LaunchResponse
	ctlJSON(t, &r, "resume", id[:6], "--prompt", "and now the tests")
	if r.Session.ID != id || r.Session.UpstreamID != l.Session.UpstreamID || r.Session.PID == l.Session.PID || r.Fresh || r.Forked {
		t.Fatalf("resume: %+v", r)
	}
	testenv.EventuallyOK(t, 5*time.Second, "the resumed session stopped", stoppedWithCursor)
}

// events --follow prints events as they are recorded until it is
// interrupted (its context ends, as on Ctrl-C), and then exits 0.
func TestEventsFollow(t *testing.T) {
	newWorld(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errs daemontest.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"--json", "events", "--follow"}, &out, &errs) }()
	testenv.Eventually(t, 5*time.Second, "the seeded sessions' events", func() bool {
		return strings.Contains(out.String(), `"session_id": "`+victimID+`"`)
	})
	if _, errs, code := ctl("stop", victimID, "--timeout", "2s"); code != exitOK {
		t.Fatalf("stop: exit %d: %s", code, errs)
	}
	testenv.EventuallyOK(t, 5*time.Second, "the stop followed", func() (bool, string) {
		for _, ev := range decodeEvents(t, out.String()) {
			if ev.SessionID == victimID && ev.Type == session.EventAction {
				return true, ""
			}
		}
		return false, out.String()
	})
	cancel()
	select {
	case code := <-done:
		if code != exitOK || errs.String() != "" {
			t.Fatalf("interrupted events --follow: exit %d: %s", code, errs.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("events --follow did not end with its context")
	}
}
