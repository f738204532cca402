package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/session"
)

// The first page comes with its rows in top's order: waiting (longest
// first), interrupted, busy, idle (most recent first), stopped; a stopped
// session older than a day only with ?all=1; each row with what it waits
// for, its problems and orphans, and its host when hosts are named.
func TestFirstPageRowsInTopsOrder(t *testing.T) {
	_, sock := startDaemonStub(t)
	now := time.Now()
	at := func(d time.Duration) *time.Time { x := now.Add(-d); return &x }
	run := session.StatusRunning
	ss := []api.Session{
		{ID: "idle0000new1", Status: run, Activity: session.ActivityIdle, ActivitySince: at(time.Minute)},
		{ID: "stopped0old1", Status: session.StatusStopped, StoppedAt: at(72 * time.Hour), Cwd: "/src/old"},
		{ID: "wait0000new1", Status: run, Activity: session.ActivityWaiting, ActivitySince: at(time.Minute),
			WaitingFor: &session.WaitingFor{Kind: session.WaitingQuestion, Question: "which <db>?"}},
		{ID: "busy00000001", Status: run, Activity: session.ActivityBusy, ActivitySince: at(time.Second)},
		{ID: "interrupted1", Status: session.StatusInterrupted, StoppedAt: at(time.Hour),
			Problems: []session.Problem{{Kind: session.ProblemOrphanedToolCall}, {Kind: session.ProblemOrphanedToolCall}, {Kind: session.ProblemOrphanProcesses}}},
		{ID: "wait0000old1", Status: run, Activity: session.ActivityWaiting, ActivitySince: at(time.Hour),
			WaitingFor: &session.WaitingFor{Kind: session.WaitingPermission, Tool: "Bash", Input: "rm -rf build"}},
		{ID: "idle0000old1", Status: run, Activity: session.ActivityIdle, ActivitySince: at(time.Hour), Title: "fix the tests"},
		{ID: "stopped0new1", Status: session.StatusStopped, StoppedAt: at(time.Hour)},
	}
	s, err := New(Options{Hosts: []Host{{Name: "unix:///a", Client: api.NewClient(sock)}, {Name: "ssh://box", Client: api.NewClient(sock)}},
		Listen: "127.0.0.1:1", Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	for i := range ss {
		ss[i].Host = "ssh://box"
		s.hub.sessions[key{"ssh://box", ss[i].ID}] = ss[i]
	}
	s.hub.listed["unix:///a"], s.hub.listed["ssh://box"] = true, true
	get := func(path string) string {
		r := httptest.NewRequest("GET", path, nil)
		r.Host = "127.0.0.1:1"
		r.AddCookie(&http.Cookie{Name: CookieName, Value: testToken})
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r.WithContext(context.Background()))
		if w.Code != 200 {
			t.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
		}
		return w.Body.String()
	}
	ids := func(page string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`data-id="([^"]+)" data-state="([^"]+)"`).FindAllStringSubmatch(page, -1) {
			out = append(out, m[1]+":"+m[2])
		}
		return out
	}
	page := get("/")
	want := []string{"wait0000old1:waiting", "wait0000new1:waiting", "interrupted1:interrupted", "busy00000001:busy",
		"idle0000new1:idle", "idle0000old1:idle", "stopped0new1:stopped"}
	if got := ids(page); !slices.Equal(got, want) {
		t.Errorf("rows %v\nwant %v", got, want)
	}
	for _, text := range []string{"permission for Bash: rm -rf build", "a question: which &lt;db&gt;?", "orphaned_tool_call(2)", "1 orphan<",
		"“fix the tests”", ">box<", "2 waiting, 1 interrupted, 1 busy, 2 idle, 1 stopped"} {
		if !strings.Contains(page, text) {
			t.Errorf("the page lacks %q", text)
		}
	}
	if got := ids(get("/?all=1")); len(got) != 8 || got[7] != "stopped0old1:stopped" {
		t.Errorf("?all=1: rows %v; want the old stopped one last", got)
	}
	// Past firstRows the page says how many more the script will add.
	for i := range firstRows + 5 {
		id := fmt.Sprintf("zz%010d", i)
		s.hub.sessions[key{"ssh://box", id}] = api.Session{ID: id, Host: "ssh://box", Status: session.StatusStopped, StoppedAt: at(time.Minute)}
	}
	page = get("/")
	if got := ids(page); len(got) != firstRows || !strings.Contains(page, fmt.Sprintf("and %d more", 7+firstRows+5-firstRows)) {
		t.Errorf("%d sessions: %d rows in the HTML, want %d and the rest counted", 7+firstRows+5, len(got), firstRows)
	}
}
