package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/actions"
	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/launch"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
	"github.com/sessiond/sessiond/tracker"
)

// The API request bodies (LaunchRequest, ResumeRequest, ActionRequest) are
// outside data: any local program may send them. These fuzz targets drive
// the real handlers, through the real route table, body limit and handler
// timeout, with a server built in-package whose every way out of the
// process is blocked:
//
//   - the only launcher ("claude") names an agent binary that does not
//     exist, so launch.Start fails at its LookPath before anything runs;
//   - the terminator's Signal refuses (and counts) every signal;
//   - no seeded record has a live owner, so stop and reap find nothing.
//
// Each request must answer 2xx or 4xx (or 503, the documented "cannot
// tell") with a JSON body; 500, a panic, a launched process or a signal
// fails the target.

// fuzzAPI is one in-package server over a seeded store.
type fuzzAPI struct {
	h         http.Handler
	dir       string
	signalled atomic.Int64
}

// fuzzLauncher is a Launcher whose commands can never start: the binary is
// an absolute path that does not exist.
type fuzzLauncher struct{ bin string }

func (l fuzzLauncher) NewCommand(spec adapters.LaunchSpec) (adapters.Command, error) {
	return adapters.Command{Argv: append([]string{l.bin}, spec.Args...), Cwd: spec.Cwd, UpstreamID: "fuzz-upstream"}, nil
}

func (l fuzzLauncher) ResumeCommand(cur session.ResumeCursor, spec adapters.LaunchSpec, fork bool) (adapters.Command, error) {
	return adapters.Command{Argv: []string{l.bin, "--resume", cur.UpstreamID}, Cwd: cur.Cwd, UpstreamID: cur.UpstreamID}, nil
}

func (l fuzzLauncher) Exists(ctx context.Context, cur session.ResumeCursor) (adapters.Existence, error) {
	switch cur.UpstreamID {
	case "up-missing":
		return adapters.Missing, errors.New("fuzz: transcript gone")
	case "up-unknown":
		return adapters.ExistenceUnknown, errors.New("fuzz: cannot tell")
	}
	return adapters.Exists, nil
}

// fuzzRepairer plans and "applies" one step without touching anything.
type fuzzRepairer struct{}

func (fuzzRepairer) PlanRepair(ctx context.Context, t adapters.RepairTarget) ([]session.Step, error) {
	return []session.Step{{Action: "nothing", Target: t.UpstreamID, Outcome: session.OutcomePlanned}}, nil
}

func (fuzzRepairer) ApplyRepair(ctx context.Context, t adapters.RepairTarget) ([]session.Step, error) {
	return []session.Step{{Action: "nothing", Target: t.UpstreamID, Outcome: session.OutcomeSkipped}}, nil
}

// fuzzAdapter observes nothing: reap's fresh look finds no orphans.
type fuzzAdapter struct{}

func (fuzzAdapter) Name() string { return "claude" }
func (fuzzAdapter) Discover(ctx context.Context, snap *proc.Snapshot) (adapters.Observation, error) {
	return adapters.Observation{}, nil
}
func (fuzzAdapter) WatchPaths() []string { return nil }

// deadPID is far above any pid_max: kill(pid, 0) says ESRCH.
const deadPID = 2000000000

func newFuzzAPI(f *testing.F) *fuzzAPI {
	f.Helper()
	dir := f.TempDir()
	st, err := state.Open(filepath.Join(dir, "sessiond.db"), state.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	cwd := filepath.Join(dir, "proj")
	if err := os.MkdirAll(cwd, 0o700); err != nil {
		f.Fatal(err)
	}
	cursor := func(agent, up string) *session.ResumeCursor {
		return &session.ResumeCursor{SchemaVersion: session.ResumeCursorVersion, Agent: agent, UpstreamID: up, Cwd: cwd, Root: filepath.Join(dir, "root")}
	}
	dead := proc.Identity{BootID: "fuzz-boot", PID: deadPID, StartTicks: 1}
	now := time.Now()
	recs := []*session.Record{
		{ID: "fz0000000001", Agent: "claude", UpstreamID: "up-exists", Status: session.StatusStopped, Cwd: cwd, Resume: cursor("claude", "up-exists")},
		{ID: "fz0000000002", Agent: "claude", UpstreamID: "up-missing", Status: session.StatusInterrupted, Cwd: cwd, Resume: cursor("claude", "up-missing")},
		{ID: "fz0000000003", Agent: "claude", UpstreamID: "up-unknown", Status: session.StatusStopped, Cwd: cwd, Resume: cursor("claude", "up-unknown")},
		{ID: "fz0000000004", Agent: "claude", UpstreamID: "up-nocursor", Status: session.StatusStopped, Cwd: cwd},
		{ID: "fz0000000005", Agent: "other", UpstreamID: "up-other", Status: session.StatusStopped, Cwd: cwd, Resume: cursor("other", "up-other")},
		{ID: "fz0000000006", Agent: "claude", UpstreamID: "up-dead", Status: session.StatusRunning, Cwd: cwd, Owner: &dead, Launched: true, Resume: cursor("claude", "up-dead")},
		{ID: "fz0000000007", Agent: "claude", UpstreamID: "up-badcursor", Status: session.StatusStopped, Cwd: cwd,
			Resume: &session.ResumeCursor{SchemaVersion: 99, Agent: "claude", UpstreamID: "up-badcursor", Cwd: "relative", Root: ""}},
	}
	for _, r := range recs {
		r.CreatedAt = now
		if err := st.Create(r, session.Event{Type: session.EventCreated, To: r.Status, Time: now}); err != nil {
			f.Fatal(err)
		}
	}
	host := proc.NewHost()
	tr := tracker.New(tracker.Config{Store: st, Adapters: []adapters.Adapter{fuzzAdapter{}}, Host: host, Logger: zap.NewNop()})
	fa := &fuzzAPI{dir: dir}
	bin := filepath.Join(dir, "no-such-agent")
	s := newServer(serverConfig{
		store: st, tracker: tr, log: zap.NewNop(), version: "fuzz", started: now,
		socket: filepath.Join(dir, "s.sock"), uid: os.Getuid(),
		launcher:   launch.New(launch.Config{LogDir: filepath.Join(dir, "logs"), Host: host, Tmux: filepath.Join(dir, "no-such-tmux")}),
		launchers:  map[string]adapters.Launcher{"claude": fuzzLauncher{bin: bin}},
		repairers:  map[string]adapters.Repairer{"claude": fuzzRepairer{}},
		aborters:   map[string]adapters.Aborter{},
		terminator: &actions.Terminator{Probe: host, Signal: func(pid int, sig syscall.Signal) error { fa.signalled.Add(1); return errors.New("fuzz: no signals") }},
	})
	fa.h = s.handler()
	return fa
}

// do sends one request as the daemon's own user and checks the answer.
// It returns the status code.
func (fa *fuzzAPI) do(t *testing.T, method, path string, body []byte) int {
	t.Helper()
	req := httptest.NewRequest(method, "http://sessiond"+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req = req.WithContext(context.WithValue(req.Context(), peerKey, peer{uid: os.Getuid()}))
	w := httptest.NewRecorder()
	fa.h.ServeHTTP(w, req)
	res := w.Result()
	code := res.StatusCode
	out := w.Body.Bytes()
	switch {
	case code >= 200 && code < 300, code >= 400 && code < 500:
	case code == http.StatusServiceUnavailable:
		// "cannot tell": documented, and must say so in its code.
	default:
		t.Fatalf("%s %s with body %q: status %d: %s", method, path, body, code, out)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s %s: status %d with Content-Type %q: %s", method, path, code, ct, out)
	}
	if !json.Valid(out) {
		t.Fatalf("%s %s: status %d with a body that is not JSON: %q", method, path, code, out)
	}
	if code >= 400 {
		var e api.Error
		if err := json.Unmarshal(out, &e); err != nil || e.Error == "" || e.Code == "" {
			t.Fatalf("%s %s: status %d with a body that is not an api.Error: %s", method, path, code, out)
		}
		if code == http.StatusServiceUnavailable && e.Code != api.CodeUnavailable {
			t.Fatalf("%s %s: 503 with code %q: %s", method, path, e.Code, out)
		}
	}
	if n := fa.signalled.Load(); n != 0 {
		t.Fatalf("%s %s with body %q tried to signal a process (%d signals)", method, path, body, n)
	}
	return code
}

// refPath makes a fuzzed session reference a single path segment the
// route table can match; "", "." and ".." would be cleaned into another
// route (a redirect), which is the mux's business, not the handlers'.
func refPath(ref string) string {
	if ref == "" || ref == "." || ref == ".." {
		ref = "x" + ref
	}
	return url.PathEscape(ref)
}

var fuzzBodies = []string{
	``, `{}`, `null`, `[]`, `"x"`, `0`, `{`, `}{`, `{"a":1}`, "\xff\xfe", `{"agent":"claude","cwd":"/"}{"x":1}`,
	`{"agent":1}`, `{"apply":"yes"}`, `{"fork":null,"cwd":null}`, `{"prompt":"\u0000\ud800"}`,
	`{"agent":"claude","cwd":"` + strings.Repeat("a/", 2000) + `"}`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	`{"timeout":"1e400s"}`, `{"timeout":"9223372036854775807ns"}`, `{"timeout":"-0s"}`, `{"env":{"":"","=":"="}}`,
}

func FuzzLaunchRequest(f *testing.F) {
	fa := newFuzzAPI(f)
	proj := filepath.Join(fa.dir, "proj")
	for _, req := range []api.LaunchRequest{
		{Agent: "claude", Cwd: proj, Prompt: "list the files"},
		{Agent: "claude", Cwd: proj, Mode: "tmux", Args: []string{"--model", "x"}, Env: map[string]string{"K": "V"}},
		{Agent: "claude", Cwd: proj, Mode: "bogus"},
		{Agent: "claude", Cwd: "relative/dir"},
		{Agent: "claude", Cwd: filepath.Join(fa.dir, "does-not-exist")},
		{Agent: "claude", Cwd: filepath.Join(fa.dir, "sessiond.db")},
		{Agent: "opencode", Cwd: proj},
		{Agent: "", Cwd: ""},
	} {
		b, _ := json.Marshal(req)
		f.Add(b)
	}
	for _, b := range fuzzBodies {
		f.Add([]byte(b))
	}
	f.Add([]byte(`{"agent":"claude","cwd":"` + proj + `","unknown":true}`))
	f.Add(append([]byte(`{"agent":"claude","cwd":"`+proj+`","prompt":"`), append(bytes.Repeat([]byte("x"), maxBody), '"', '}')...))
	f.Fuzz(func(t *testing.T, body []byte) {
		if code := fa.do(t, "POST", "/v1/sessions", body); code < 300 {
			t.Fatalf("a launch succeeded (status %d) though no agent binary exists: %q", code, body)
		}
	})
}

func FuzzResumeRequest(f *testing.F) {
	fa := newFuzzAPI(f)
	proj := filepath.Join(fa.dir, "proj")
	refs := []string{"fz0000000001", "fz0000000002", "fz0000000003", "fz0000000004", "fz0000000005", "fz0000000006", "fz0000000007", "fz", "up-exists", "nope"}
	bodies := []string{``, `{}`, `{"prompt":"again"}`, `{"fork":true,"prompt":"fork it"}`, `{"cwd":"` + proj + `"}`,
		`{"cwd":"/"}`, `{"cwd":"relative"}`, `{"mode":"tmux"}`, `{"mode":"x","fork":true}`, `{"unknown":1}`}
	for i, ref := range refs {
		f.Add(ref, []byte(bodies[i%len(bodies)]))
	}
	for _, b := range bodies {
		f.Add("fz0000000001", []byte(b))
	}
	for _, b := range fuzzBodies {
		f.Add("fz0000000002", []byte(b))
	}
	f.Add("a/b", []byte(`{}`))
	f.Add("\x00", []byte(`{}`))
	f.Fuzz(func(t *testing.T, ref string, body []byte) {
		if code := fa.do(t, "POST", "/v1/sessions/"+refPath(ref)+"/resume", body); code < 300 {
			t.Fatalf("a resume succeeded (status %d) though no agent binary exists: %q %q", code, ref, body)
		}
	})
}

var fuzzActions = []string{"repair", "abort", "reap", "stop"}

func FuzzActionRequest(f *testing.F) {
	fa := newFuzzAPI(f)
	bodies := []string{``, `{}`, `{"apply":true}`, `{"apply":false,"timeout":"1s"}`, `{"timeout":"26s"}`, `{"timeout":"0s"}`,
		`{"timeout":"x"}`, `{"force":true}`, `{"apply":true,"force":true,"timeout":"25s"}`, `{"bogus":1}`}
	refs := []string{"fz0000000001", "fz0000000004", "fz0000000005", "fz0000000006", "fz", "nope"}
	for a := range fuzzActions {
		for i, ref := range refs {
			f.Add(uint8(a), ref, []byte(bodies[(i+a)%len(bodies)]))
		}
	}
	for i, b := range fuzzBodies {
		f.Add(uint8(i), "fz0000000006", []byte(b))
	}
	f.Fuzz(func(t *testing.T, action uint8, ref string, body []byte) {
		name := fuzzActions[int(action)%len(fuzzActions)]
		fa.do(t, "POST", "/v1/sessions/"+refPath(ref)+"/"+name, body)
	})
}
