// Package crashloop kills sessiond with SIGKILL at random moments while
// agent sessions start and die around it, restarts it, and checks after
// every restart what sessiond promises to survive a crash. It is killed
// under load, and in a quarter of the rounds once more while it starts
// (opening the store, reconciling). After each restart:
//
//   - no acknowledged record is lost: every launch that answered success,
//     and every session a client was shown, is still there, unchanged in
//     identity (id, agent, upstream id, owner);
//   - no event a client saw is lost or changed, and event sequence numbers
//     only go up (no repeat, no step back);
//   - the bbolt file is consistent (bbolt's own check, plus the store's
//     tree: every event key matches its seq, every record decodes, every
//     index entry points at a record);
//   - a session is running iff its owner lives: right after the restart
//     is ready (sessiond reconciles before it reports ready), no session
//     says running for a dead owner and none says stopped for a live one;
//     after the launch grace every live owner's session is running and
//     every dead one's stopped or interrupted.
//
// The owners are fake claude processes launched through sessiond (they sit
// in an hour-long tool call) and plain processes started by the test with a
// Claude registry entry naming them, as an interactive claude would. Both
// kinds are killed at random, while sessiond runs and while it is down.
//
// 30 rounds by default (5 with -short); -crashloop.rounds=N or
// CRASHLOOP_ROUNDS=N for more, -crashloop.seed (CRASHLOOP_SEED) to replay
// a run's random choices:
//
//	go test ./internal/crashloop -v -crashloop.rounds=300
package crashloop

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"

	"github.com/sessiond/sessiond/internal/testkit/testenv"
)

var (
	roundsFlag = flag.Int("crashloop.rounds", 0, "rounds of the crash loop (default 30, 5 with -short, or $CRASHLOOP_ROUNDS)")
	seedFlag   = flag.Uint64("crashloop.seed", 0, "random seed (default: from the clock, or $CRASHLOOP_SEED)")
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	daemontest.Cleanup()
	os.Exit(code)
}

func envInt(name string, def uint64) uint64 {
	if v := os.Getenv(name); v != "" {
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			return n
		}
	}
	return def
}

// grace is the daemon's launch grace: short, so the settle check after
// each restart does not wait long for starting -> running.
const grace = time.Second

// owner is a process that owns a session: launched by sessiond (a fake
// claude) or started by the test with a registry entry (external).
type owner struct {
	id       proc.Identity
	launched bool
	upstream string
	// sid is the sessiond id: known at once for a launch, once seen for an
	// external owner.
	sid    string
	cmd    *exec.Cmd     // external only: the test is its parent
	waited chan struct{} // external only: closed once reaped
	killed bool
}

type loop struct {
	t    *testing.T
	e    *daemontest.Env
	c    *api.Client
	host *proc.Host
	root *claudetest.Root
	tag  string
	rng  *rand.Rand
	cwds []string

	mu     sync.Mutex
	owners []*owner
	// acked are the sessions a client was told about: a launch answer, a
	// listing. Identity fields must never change or vanish.
	acked map[string]api.Session
	// seen are the events a client was shown, by seq.
	seen    map[uint64]api.Event
	maxSeen uint64

	stats struct {
		launches, launchErrs, externals, kills, downKills, startupKills int
	}
}

func (l *loop) rand(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rng.IntN(n)
}

func TestCrashLoop(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("needs a Unix process table")
	}
	def := uint64(30)
	if testing.Short() {
		def = 5
	}
	rounds := int(envInt("CRASHLOOP_ROUNDS", def))
	if *roundsFlag > 0 {
		rounds = *roundsFlag
	}
	seed := envInt("CRASHLOOP_SEED", uint64(time.Now().UnixNano()))
	if *seedFlag != 0 {
		seed = *seedFlag
	}
	t.Logf("crash loop: %d rounds, seed %d (-crashloop.seed=%d replays the random choices, not the timing)", rounds, seed, seed)

	e := daemontest.NewEnv(t)
	l := &loop{t: t, e: e, c: api.NewClient(e.Socket), host: proc.NewHost(),
		root:  claudetest.NewRoot(t, filepath.Join(e.Home, ".claude")),
		tag:   fmt.Sprintf("crashloop-%d-%d", os.Getpid(), seed),
		rng:   rand.New(rand.NewPCG(seed, seed^0x5e55)),
		acked: map[string]api.Session{}, seen: map[uint64]api.Event{}}
	for i := range 4 {
		d := filepath.Join(e.Home, "src", "p"+strconv.Itoa(i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		l.cwds = append(l.cwds, d)
	}
	t.Cleanup(l.killAll)

	args := []string{"--claude-bin", e.FakeClaude, "--grace", grace.String(), "--log-level", "info"}
	start := time.Now()
	d := e.StartDaemon(args...)
	var up, down, settle time.Duration
	for r := 1; r <= rounds; r++ {
		t0 := time.Now()
		l.active(d, time.Duration(100+l.rand(900))*time.Millisecond)
		t1 := time.Now()
		l.whileDown()
		l.checkStore(fmt.Sprintf("round %d, sessiond down", r))
		if l.rand(4) == 0 {
			// Also kill it while it starts: opening the store, reconciling.
			sd, err := e.StartDaemonNoWait(args...)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(l.rand(150)) * time.Millisecond)
			sd.Kill()
			l.stats.startupKills++
			l.checkStore(fmt.Sprintf("round %d, killed while starting", r))
		}
		t2 := time.Now()
		d = e.StartDaemon(args...)
		l.checkRestart(r)
		l.settle(r)
		t3 := time.Now()
		up, down, settle = up+t1.Sub(t0), down+t2.Sub(t1), settle+t3.Sub(t2)
		if t.Failed() {
			t.Fatalf("round %d failed (seed %d)", r, seed)
		}
		if r%10 == 0 || r == rounds {
			t.Logf("round %d/%d: %d sessions, %d events, %d launches acknowledged (%d cut off), %d external owners, %d owners killed (%d while sessiond was down), %d kills of a starting sessiond, %s so far",
				r, rounds, len(l.acked), l.maxSeen, l.stats.launches, l.stats.launchErrs, l.stats.externals, l.stats.kills+l.stats.downKills, l.stats.downKills,
				l.stats.startupKills, time.Since(start).Round(time.Millisecond))
		}
	}
	d.Kill()
	l.checkStore("end")
	took := time.Since(start)
	t.Logf("crash loop: %d rounds in %s (%s per round: %s under load before the kill, %s down, %s restart and checks)",
		rounds, took.Round(time.Millisecond), (took / time.Duration(rounds)).Round(time.Millisecond),
		(up / time.Duration(rounds)).Round(time.Millisecond), (down / time.Duration(rounds)).Round(time.Millisecond),
		(settle / time.Duration(rounds)).Round(time.Millisecond))
	if l.stats.launches == 0 || l.stats.externals == 0 || l.stats.kills == 0 || l.stats.downKills == 0 || l.maxSeen == 0 {
		t.Fatalf("the loop exercised too little: %+v, %d events", l.stats, l.maxSeen)
	}
}

// active runs launches, external owners, kills and an event subscriber
// against the live daemon for about dur, then kills sessiond with SIGKILL
// while all of it is still going.
func (l *loop) active(d *daemontest.Daemon, dur time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); l.subscribe(ctx) }()
	for w := range 2 {
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				switch n := l.rand(10); {
				case n < 4 && w == 0:
					l.launch(ctx)
				case n < 6:
					l.external()
				case n < 8:
					l.killOne(false)
				default:
					l.observe(ctx)
				}
				time.Sleep(time.Duration(5+l.rand(40)) * time.Millisecond)
			}
		}()
	}
	time.Sleep(dur)
	d.Kill()
	cancel()
	wg.Wait()
}

// liveCount is the number of owners not killed yet.
func (l *loop) liveCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, o := range l.owners {
		if !o.killed {
			n++
		}
	}
	return n
}

const maxLive = 12

// launch starts a fake claude through sessiond; a success answer makes the
// record acknowledged.
func (l *loop) launch(ctx context.Context) {
	if l.liveCount() >= maxLive {
		return
	}
	cwd := l.cwds[l.rand(len(l.cwds))]
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := l.c.Launch(cctx, api.LaunchRequest{Agent: "claude", Cwd: cwd, Prompt: "run the tests",
		Env: map[string]string{"FAKE_CLAUDE_TOOL_SLEEP": "3600", "CRASHLOOP_TAG": l.tag}})
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		// Cut off by the kill (or cancelled): not acknowledged. The record
		// may or may not exist; the restart checks hold for it either way.
		var se *api.StatusError
		if errors.As(err, &se) {
			l.t.Errorf("launch refused with a live daemon: %v", err)
		}
		l.stats.launchErrs++
		return
	}
	s := r.Session
	if s.ID == "" || s.PID == 0 || !s.Launched || s.UpstreamID == "" {
		l.t.Errorf("launch answer without identity: %+v", s)
		return
	}
	l.stats.launches++
	l.acked[s.ID] = s
	l.owners = append(l.owners, &owner{id: proc.Identity{BootID: s.BootID, PID: s.PID, StartTicks: s.PIDStart},
		launched: true, upstream: s.UpstreamID, sid: s.ID})
}

// external starts a process that stands for an interactive claude the
// user started: a registry entry names it, a transcript shows a tool call
// in flight.
func (l *loop) external() {
	if l.liveCount() >= maxLive {
		return
	}
	cmd := exec.Command("sleep", "3600")
	cmd.Env = append(os.Environ(), "CRASHLOOP_TAG="+l.tag)
	if err := cmd.Start(); err != nil {
		l.t.Errorf("start owner: %v", err)
		return
	}
	waited := make(chan struct{})
	go func() { cmd.Wait(); close(waited) }()
	id, err := l.host.Identify(cmd.Process.Pid)
	if err != nil {
		l.t.Errorf("identify owner: %v", err)
		return
	}
	sid := claudetest.NewSessionID()
	cwd := l.cwds[l.rand(len(l.cwds))]
	l.root.WriteRegistry(l.t, claudetest.LiveEntry(l.t, id.PID, sid, cwd, "busy"))
	tr := claudetest.NewTranscript(sid, cwd, time.Now().Add(-time.Minute))
	tr.Turn("hello", "ls", "a b", "two files")
	tr.CrashMidTool("run the tests", "go test ./...")
	l.root.WriteTranscript(l.t, tr)
	l.mu.Lock()
	l.owners = append(l.owners, &owner{id: id, upstream: sid, cmd: cmd, waited: waited})
	l.stats.externals++
	l.mu.Unlock()
}

// killOne SIGKILLs a random live owner (a launched one's whole group).
func (l *loop) killOne(down bool) {
	l.mu.Lock()
	var live []*owner
	for _, o := range l.owners {
		if !o.killed {
			live = append(live, o)
		}
	}
	if len(live) == 0 {
		l.mu.Unlock()
		return
	}
	o := live[l.rng.IntN(len(live))]
	o.killed = true
	if down {
		l.stats.downKills++
	} else {
		l.stats.kills++
	}
	l.mu.Unlock()
	l.kill(o)
}

func (l *loop) kill(o *owner) {
	if o.launched {
		// Launched with setsid: the pid is the group. Only signal it while
		// it is still that very process.
		if l.host.Probe(o.id).Liveness == proc.Alive {
			syscall.Kill(-o.id.PID, syscall.SIGKILL)
		}
	} else {
		o.cmd.Process.Kill()
		<-o.waited
	}
	// Wait until the death is visible (reaped, or a zombie of a dead
	// daemon's), so "killed" means dead for the checks.
	if !testenv.Poll(10*time.Second, func() bool { return l.host.Probe(o.id).Liveness != proc.Alive }) {
		l.t.Errorf("pid %d still alive 10s after SIGKILL", o.id.PID)
	}
}

// observe lists the sessions as a client would: what it is shown is
// acknowledged.
func (l *loop) observe(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ss, err := l.c.Sessions(cctx, api.ListOptions{All: true})
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range ss {
		l.ackLocked(s)
	}
}

// ackLocked records a session a client saw, after checking that its
// identity did not change since it was last seen.
func (l *loop) ackLocked(s api.Session) {
	old, ok := l.acked[s.ID]
	if !ok {
		l.acked[s.ID] = s
		return
	}
	if s.Agent != old.Agent || s.UpstreamID != old.UpstreamID {
		l.t.Errorf("session %s changed identity: %s/%s -> %s/%s", s.ID, old.Agent, old.UpstreamID, s.Agent, s.UpstreamID)
	}
	// Listings run concurrently with launches, so one may answer from
	// before a launch took over a discovered record: launched only ever
	// goes from false to true, and is checked at each restart.
	launched := s.Launched || old.Launched
	if s.PID != 0 {
		l.acked[s.ID] = s
	}
	a := l.acked[s.ID]
	a.Launched = launched
	l.acked[s.ID] = a
}

// subscribe follows the event stream from the last seen event, as a
// client would, recording every event it is shown.
func (l *loop) subscribe(ctx context.Context) {
	l.mu.Lock()
	since := l.maxSeen
	l.mu.Unlock()
	prev := since
	_ = l.c.Events(ctx, api.EventsOptions{Since: since, Follow: true}, func(ev api.Event) error {
		if ev.Seq <= prev {
			l.t.Errorf("event stream went back: seq %d after %d", ev.Seq, prev)
		}
		prev = ev.Seq
		l.mu.Lock()
		l.seeLocked(ev)
		l.mu.Unlock()
		return nil
	})
}

func (l *loop) seeLocked(ev api.Event) {
	if old, ok := l.seen[ev.Seq]; ok {
		if !sameEvent(old, ev) {
			l.t.Errorf("event %d changed: %+v -> %+v", ev.Seq, old, ev)
		}
		return
	}
	l.seen[ev.Seq] = ev
	l.maxSeen = max(l.maxSeen, ev.Seq)
}

func sameEvent(a, b api.Event) bool {
	return a.Seq == b.Seq && a.Type == b.Type && a.SessionID == b.SessionID && a.From == b.From && a.To == b.To &&
		a.Time.Equal(b.Time)
}

// whileDown kills owners while sessiond is down and starts an external
// owner it has never seen: the restart must reconcile both before ready.
func (l *loop) whileDown() {
	for range l.rand(3) {
		l.killOne(true)
	}
	if l.rand(2) == 0 {
		l.external()
	}
}

// checkStore opens the store file read-only (sessiond is down) and checks
// it: bbolt's consistency check, each event stored under its own seq and
// below the bucket sequence, each record decodable, each index entry
// pointing at a record.
func (l *loop) checkStore(when string) {
	t := l.t
	path := filepath.Join(l.e.StateDir, "sessiond.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Errorf("%s: open store read-only: %v", when, err)
		return
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		var errs []string
		for e := range tx.Check() {
			errs = append(errs, e.Error())
		}
		if len(errs) > 0 {
			return fmt.Errorf("bbolt check: %s", strings.Join(errs, "; "))
		}
		root := tx.Bucket([]byte("v1"))
		if root == nil {
			return errors.New("no v1 bucket")
		}
		if m := root.Bucket([]byte("meta")); m == nil || len(m.Get([]byte("schema"))) != 4 {
			return errors.New("no schema version in v1/meta")
		}
		sessions, events, upstream := root.Bucket([]byte("sessions")), root.Bucket([]byte("events")), root.Bucket([]byte("upstream"))
		if sessions == nil || events == nil || upstream == nil {
			return errors.New("missing v1/sessions, v1/events or v1/upstream")
		}
		var last uint64
		err := events.ForEach(func(k, v []byte) error {
			if len(k) != 8 {
				return fmt.Errorf("event key %x is not 8 bytes", k)
			}
			seq := binary.BigEndian.Uint64(k)
			var ev session.Event
			if err := json.Unmarshal(v, &ev); err != nil {
				return fmt.Errorf("event %d: %v", seq, err)
			}
			if ev.Seq != seq || seq <= last {
				return fmt.Errorf("event under key %d has seq %d (previous %d)", seq, ev.Seq, last)
			}
			if sessions.Get([]byte(ev.SessionID)) == nil && ev.SessionID != "" {
				return fmt.Errorf("event %d names session %s, not in the store", seq, ev.SessionID)
			}
			last = seq
			return nil
		})
		if err != nil {
			return err
		}
		if last > events.Sequence() {
			return fmt.Errorf("event %d above the bucket sequence %d: a seq would repeat", last, events.Sequence())
		}
		if events.Sequence() < l.maxSeen {
			return fmt.Errorf("bucket sequence %d below event %d a client saw", events.Sequence(), l.maxSeen)
		}
		err = sessions.ForEach(func(k, v []byte) error {
			var r session.Record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("record %s: %v", k, err)
			}
			if r.ID != string(k) {
				return fmt.Errorf("record under %s has id %s", k, r.ID)
			}
			return nil
		})
		if err != nil {
			return err
		}
		return upstream.ForEach(func(k, v []byte) error {
			if sessions.Get(v) == nil {
				return fmt.Errorf("upstream index %q points at missing session %s", k, v)
			}
			return nil
		})
	})
	if err != nil {
		t.Errorf("%s: store: %v", when, err)
	}
}

// checkRestart runs right after the restarted daemon answers: it
// reconciled every session before reporting ready, so nothing here waits.
func (l *loop) checkRestart(round int) {
	t := l.t
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := l.c.Health(ctx)
	if err != nil {
		t.Errorf("round %d: health: %v", round, err)
		return
	}
	if h.StoreRecovered != "" {
		t.Errorf("round %d: the store was moved aside as corrupt: %s", round, h.StoreRecovered)
	}
	if h.ReconcileError != "" {
		t.Errorf("round %d: reconcile error: %s", round, h.ReconcileError)
	}
	if h.LastEventSeq < l.maxSeen {
		t.Errorf("round %d: last event seq %d below %d, already shown to a client", round, h.LastEventSeq, l.maxSeen)
	}

	// Which owners are alive now (nothing kills while the checks run).
	l.mu.Lock()
	byPID := map[int]*owner{}
	for _, o := range l.owners {
		byPID[o.id.PID] = o
	}
	l.mu.Unlock()

	evs1 := l.events(ctx, round)
	ss, err := l.c.Sessions(ctx, api.ListOptions{All: true})
	if err != nil {
		t.Errorf("round %d: list: %v", round, err)
		return
	}
	evs2 := l.events(ctx, round)
	got := map[string]api.Session{}
	for _, s := range ss {
		got[s.ID] = s
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	for id, a := range l.acked {
		s, ok := got[id]
		switch {
		case !ok:
			t.Errorf("round %d: acknowledged session %s (%s, pid %d) lost", round, id, a.UpstreamID, a.PID)
		case s.Agent != a.Agent || s.UpstreamID != a.UpstreamID || (a.Launched && !s.Launched) ||
			(a.PID != 0 && (s.PID != a.PID || s.PIDStart != a.PIDStart)):
			t.Errorf("round %d: session %s changed: was %s/%s pid %d launched=%v, now %s/%s pid %d launched=%v",
				round, id, a.Agent, a.UpstreamID, a.PID, a.Launched, s.Agent, s.UpstreamID, s.PID, s.Launched)
		}
	}

	// Events: every one a client saw is still there, unchanged; the log
	// only goes up.
	all := map[uint64]api.Event{}
	var prev uint64
	for _, ev := range append(evs1, evs2...) {
		all[ev.Seq] = ev
	}
	for _, ev := range evs1 {
		if ev.Seq <= prev {
			t.Errorf("round %d: event log out of order: %d after %d", round, ev.Seq, prev)
		}
		prev = ev.Seq
	}
	for seq, old := range l.seen {
		ev, ok := all[seq]
		if !ok {
			t.Errorf("round %d: event %d (%s %s -> %s), shown to a client, lost", round, seq, old.SessionID, old.From, old.To)
		} else if !sameEvent(old, ev) {
			t.Errorf("round %d: event %d changed: %+v -> %+v", round, seq, old, ev)
		}
	}
	// Each session's status is the last status its events name: a change
	// and its event commit together. evs2 may hold changes made after the
	// listing.
	lastTo := map[string]session.Status{}
	later := map[string][]session.Status{}
	for _, ev := range evs1 {
		if ev.To != "" {
			if p, ok := lastTo[ev.SessionID]; ok && ev.From != "" && ev.From != p {
				t.Errorf("round %d: session %s: event %d goes %s -> %s, but the previous event left it %s", round, ev.SessionID, ev.Seq, ev.From, ev.To, p)
			}
			lastTo[ev.SessionID] = ev.To
		}
	}
	for _, ev := range evs2 {
		if ev.To != "" && (len(evs1) == 0 || ev.Seq > evs1[len(evs1)-1].Seq) {
			later[ev.SessionID] = append(later[ev.SessionID], ev.To)
		}
	}
	for _, s := range ss {
		want, ok := lastTo[s.ID]
		if !ok && len(later[s.ID]) == 0 {
			t.Errorf("round %d: session %s (%s) has no event", round, s.ID, s.Status)
			continue
		}
		if s.Status != want && !contains(later[s.ID], s.Status) {
			t.Errorf("round %d: session %s is %s but its last event says %s", round, s.ID, s.Status, want)
		}
	}

	// Running iff the owner lives, already at ready.
	for _, s := range ss {
		if s.PID == 0 {
			if s.Status == session.StatusRunning {
				t.Errorf("round %d: session %s running without an owner", round, s.ID)
			}
			continue
		}
		id := proc.Identity{BootID: s.BootID, PID: s.PID, StartTicks: s.PIDStart}
		alive := l.host.Probe(id).Liveness == proc.Alive
		live := s.Status == session.StatusRunning || s.Status == session.StatusStarting
		o := byPID[s.PID]
		switch {
		case live && !alive:
			t.Errorf("round %d: ghost: session %s is %s but its owner pid %d is dead (%s)", round, s.ID, s.Status, s.PID, s.StatusReason)
		case !live && alive:
			t.Errorf("round %d: false stop: session %s is %s (%s) but its owner pid %d lives", round, s.ID, s.Status, s.StatusReason, s.PID)
		case o != nil && o.killed && alive:
			t.Errorf("round %d: pid %d was killed but probes alive", round, s.PID)
		}
		if o != nil && o.sid == "" && o.upstream == s.UpstreamID {
			o.sid = s.ID
		}
		l.ackLocked(s)
	}
	for _, ev := range append(evs1, evs2...) {
		l.seeLocked(ev)
	}
}

func contains(xs []session.Status, x session.Status) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// events reads the whole event log.
func (l *loop) events(ctx context.Context, round int) []api.Event {
	var evs []api.Event
	if err := l.c.Events(ctx, api.EventsOptions{}, func(ev api.Event) error {
		evs = append(evs, ev)
		return nil
	}); err != nil {
		l.t.Errorf("round %d: events: %v", round, err)
	}
	return evs
}

// settle waits, within a generous bound, until every owner the test knows
// of has its session in the final state: running while it lives (past the
// launch grace), stopped or interrupted once dead.
func (l *loop) settle(round int) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var bad []string
	var listErr error
	settled := testenv.Poll(30*time.Second, func() bool {
		ss, err := l.c.Sessions(ctx, api.ListOptions{All: true})
		if err != nil {
			listErr = err
			return true
		}
		bad = l.unsettled(ss)
		return len(bad) == 0
	})
	switch {
	case listErr != nil:
		l.t.Errorf("round %d: list: %v", round, listErr)
	case !settled:
		l.t.Errorf("round %d: not settled after 30s:\n  %s", round, strings.Join(bad, "\n  "))
	}
}

// unsettled says, for each owner whose session is not in its final state
// in ss, what is wrong.
func (l *loop) unsettled(ss []api.Session) []string {
	byUp := map[string]api.Session{}
	for _, s := range ss {
		byUp[s.UpstreamID] = s
	}
	var bad []string
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, o := range l.owners {
		s, ok := byUp[o.upstream]
		alive := l.host.Probe(o.id).Liveness == proc.Alive
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("pid %d (%s): no session", o.id.PID, o.upstream))
		case o.sid != "" && s.ID != o.sid:
			bad = append(bad, fmt.Sprintf("pid %d: session %s, was %s", o.id.PID, s.ID, o.sid))
		case alive && s.Status != session.StatusRunning:
			bad = append(bad, fmt.Sprintf("pid %d lives, session %s is %s (%s)", o.id.PID, s.ID, s.Status, s.StatusReason))
		case !alive && s.Status != session.StatusStopped && s.Status != session.StatusInterrupted:
			bad = append(bad, fmt.Sprintf("pid %d is dead, session %s is %s (%s)", o.id.PID, s.ID, s.Status, s.StatusReason))
		case o.killed && alive:
			bad = append(bad, fmt.Sprintf("pid %d killed but alive", o.id.PID))
		}
		if ok {
			if o.sid == "" {
				o.sid = s.ID
			}
			l.ackLocked(s)
		}
	}
	return bad
}

// killAll kills every owner the test started or had sessiond launch,
// including launches whose answer was cut off by a kill (found by the tag
// in their environment).
func (l *loop) killAll() {
	l.mu.Lock()
	owners := append([]*owner(nil), l.owners...)
	// Launches cut off by a kill were found through their registry entries.
	for _, s := range l.acked {
		if s.PID != 0 {
			owners = append(owners, &owner{id: proc.Identity{BootID: s.BootID, PID: s.PID, StartTicks: s.PIDStart}})
		}
	}
	l.mu.Unlock()
	for _, o := range owners {
		if o.cmd != nil {
			o.cmd.Process.Kill()
			<-o.waited
		} else if l.host.Probe(o.id).Liveness == proc.Alive {
			syscall.Kill(-o.id.PID, syscall.SIGKILL)
		}
	}
	daemontest.KillByEnv("CRASHLOOP_TAG", l.tag)
}
