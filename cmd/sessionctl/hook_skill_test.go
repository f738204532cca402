package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/session"
)

// skillShellPayload is the PreSkillShellCommand the real Claude Code
// 2.1.332 sent before a skill's shell command ran
// (adapters/claude/testdata/hooks.md).
func skillShellPayload(t *testing.T) (payload, upstream string) {
	t.Helper()
	f, err := os.Open("../../adapters/claude/testdata/hooks-2.1.332.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if l := sc.Text(); strings.Contains(l, `"hook_event_name":"PreSkillShellCommand"`) {
			i := strings.Index(l, `"session_id":"`) + len(`"session_id":"`)
			return l, l[i : i+36]
		}
	}
	t.Fatal("no PreSkillShellCommand payload in the fixture")
	return "", ""
}

// Claude Code 2.1.332's PreSkillShellCommand, run by the session's owner,
// makes a live session that waited for its next prompt busy, from the
// hook; its tool_use_id names no call, and the session, which has no call
// pending, never shows waiting: not before, not after, not in between.
func TestHookPreSkillShellCommandIsBusy(t *testing.T) {
	e := daemontest.NewEnv(t)
	payloadText, up := skillShellPayload(t)
	payload := filepath.Join(e.Dir, "payload.json")
	if err := os.WriteFile(payload, []byte(payloadText), 0o644); err != nil {
		t.Fatal(err)
	}
	_, start, oid := startOwnerShell(t, e, `read go; "$0" --socket "$1" hook claude < "$2"; exec sleep 300`, e.Sessionctl, e.Socket, payload)
	const id = "c1a0de000001"
	since := time.Now().Add(-time.Minute)
	e.Seed(&session.Record{ID: id, Agent: "claude", UpstreamID: up, Status: session.StatusRunning,
		Activity: session.ActivityIdle, ActivitySource: session.SourceRegistry, ActivitySince: &since,
		WaitingFor: &session.WaitingFor{Kind: session.WaitingInput}, Owner: &oid, Cwd: "/tmp/cc/home/proj",
		CreatedAt: since, Problems: []session.Problem{}})
	e.StartDaemon()

	// Watch every 20 ms from before the hook to well after it.
	var mu sync.Mutex
	var waits []string
	stop := make(chan struct{})
	watched := make(chan struct{})
	stopWatch := sync.OnceFunc(func() { close(stop); <-watched })
	defer stopWatch() // before the daemon stops, on a failure too
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if s := e.Show(id); s.Activity == session.ActivityWaiting {
				mu.Lock()
				waits = append(waits, string(s.ActivitySource))
				mu.Unlock()
			}
		}
	}()
	time.Sleep(600 * time.Millisecond) // a few passes (200 ms each)
	if s := e.Show(id); s.Activity != session.ActivityIdle {
		t.Fatalf("before the hook: %s from %s", s.Activity, s.ActivitySource)
	}

	sent := time.Now()
	if _, err := start.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	var s api.Session
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s = e.Show(id)
		if s.Activity == session.ActivityBusy || time.Now().After(deadline) {
			break
		}
	}
	if s.Activity != session.ActivityBusy || s.ActivitySource != session.SourceHook || s.WaitingFor != nil || s.Status != session.StatusRunning {
		t.Fatalf("after the owner's PreSkillShellCommand: %s %s from %q, waiting %+v", s.Status, s.Activity, s.ActivitySource, s.WaitingFor)
	}
	t.Logf("busy from the hook %s after the owner ran it", time.Since(sent).Round(time.Millisecond))
	time.Sleep(time.Second) // more passes: the hook holds, and asks for nothing
	stopWatch()
	if s := e.Show(id); s.Activity != session.ActivityBusy || s.ActivitySource != session.SourceHook {
		t.Errorf("a second later: %s from %s", s.Activity, s.ActivitySource)
	}
	if len(waits) > 0 {
		t.Errorf("the session showed waiting %d times (%v): PreSkillShellCommand names no call", len(waits), waits[0])
	}
}
