package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime/pprof"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/claude"
	"github.com/sessiond/sessiond/adapters/codex"
	"github.com/sessiond/sessiond/adapters/copilot"
	"github.com/sessiond/sessiond/adapters/gemini"
	"github.com/sessiond/sessiond/adapters/opencode"
	"github.com/sessiond/sessiond/adapters/pi"
	"github.com/sessiond/sessiond/adapters/qwen"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/opencodetest"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/state"
	"github.com/sessiond/sessiond/tracker"
)

// BenchmarkIdlePass is one idle reconcile pass of the real adapter and
// tracker over the agents scenario's home (2,000 sessions of history,
// nothing changing, no agent running): what a daemon spends every
// interval while the user does nothing. The agents scenario measures
// the same as a daemon's CPU over a window; this one profiles
// (go test -bench IdlePass -cpuprofile). opencode is the cold
// scenario's OpenCode database (2,000 sessions, 20 with work in flight).
func BenchmarkIdlePass(b *testing.B) {
	for _, agent := range newAgents {
		b.Run(agent, func(b *testing.B) {
			dir, h := benchHome(b, agent)
			idlePasses(b, dir, idleAdapter(agent, h.Root), len(h.IDs))
		})
	}
	b.Run("opencode", func(b *testing.B) {
		dir := b.TempDir()
		full := Full()
		ocDir := filepath.Join(dir, "opencode")
		ids, err := opencodetest.WriteHistory(filepath.Join(ocDir, "opencode.db"), opencodetest.HistorySpec{
			Sessions: full.OpenCodeSessions, Turns: full.OpenCodeTurns, InFlight: min(20, full.OpenCodeSessions/10)})
		if err != nil {
			b.Fatal(err)
		}
		idlePasses(b, dir, opencode.New(opencode.Config{DataDir: ocDir, Logger: zap.NewNop()}), len(ids))
	})
	// claude and codex: homes of the seven homes' counts (2,000
	// transcripts, 5,000 rollouts), small files: an idle pass reads none.
	b.Run("claude", func(b *testing.B) {
		dir := b.TempDir()
		root := &claudetest.Root{Dir: filepath.Join(dir, "claude")}
		hist, err := root.WriteHistory(claudetest.HistorySpec{Files: 2000, Projects: 150, Seed: 9, MidTool: 20})
		if err != nil {
			b.Fatal(err)
		}
		idlePasses(b, dir, claude.New(claude.Config{Roots: []string{root.Dir}, DefaultRoot: root.Dir,
			NoLearnedRoots: true, Logger: zap.NewNop()}), len(hist.Paths))
	})
	b.Run("codex", func(b *testing.B) {
		dir := b.TempDir()
		h, err := codextest.WriteHome(filepath.Join(dir, "codex"), codextest.HomeSpec{
			Rollouts: 5000, Days: 120, MaxTurns: 3, InFlightEvery: 20, Seed: 16})
		if err != nil {
			b.Fatal(err)
		}
		idlePasses(b, dir, codex.New(codex.Config{Roots: []string{h.Root}, NoLearnedRoots: true, Logger: zap.NewNop()}), len(h.IDs))
	})
}

// idlePasses times the tracker's idle passes over ad's sessions, n of
// them, after a first pass and one once the home has settled.
func idlePasses(b *testing.B, dir string, ad adapters.Adapter, n int) {
	st, err := state.Open(filepath.Join(dir, "state.db"), state.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	tr := tracker.New(tracker.Config{Store: st, Adapters: []adapters.Adapter{ad},
		Host: proc.NewHost(), Logger: zap.NewNop()})
	ctx := context.Background()
	rep, err := tr.Reconcile(ctx, "first")
	if err != nil {
		b.Fatal(err)
	}
	if rep.Created < n {
		b.Fatalf("first pass created %d records of %d sessions", rep.Created, n)
	}
	// The home was just written: its folders' listings settle
	// (kit.RacyWindow) before a pass trusts them, as they have long done
	// in a home of history.
	time.Sleep(2100 * time.Millisecond)
	if _, err := tr.Reconcile(ctx, "settled"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	// Labelled, so a profile can leave out the home's writing and the
	// first pass: -tagfocus pass=idle.
	pprof.Do(ctx, pprof.Labels("pass", "idle"), func(ctx context.Context) {
		for b.Loop() {
			if _, err := tr.Reconcile(ctx, "tick"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchHome writes the agents scenario's home of agent (its full scale)
// in a temporary folder, and returns the folder and the home.
func benchHome(b *testing.B, agent string) (string, *agentHome) {
	dir := b.TempDir()
	full := Full()
	h, err := writeAgentHome(agent, dir, agentSpec{Sessions: full.AgentSessions, Projects: full.AgentProjects,
		MaxTurns: full.AgentTurns, InFlightEvery: 20, Seed: 40})
	if err != nil {
		b.Fatal(err)
	}
	return dir, h
}

// idleAdapter builds agent's adapter over root as the daemon does.
func idleAdapter(agent, root string) adapters.Adapter {
	log := zap.NewNop()
	switch agent {
	case "gemini":
		return gemini.New(gemini.Config{Roots: []string{root}, Logger: log})
	case "qwen":
		return qwen.New(qwen.Config{Roots: []string{root}, Logger: log})
	case "pi":
		return pi.New(pi.Config{Roots: []string{root}, Logger: log})
	case "copilot":
		return copilot.New(copilot.Config{Roots: []string{root}, Logger: log})
	}
	panic("no adapter " + agent)
}

// BenchmarkRestartPass is a warm restart's own work over the agents
// scenario's home: the store opened, the adapter handed what it saved,
// and the first pass, which reads no file again. The restart scenario
// times the same from a signal to the socket's answer; this one
// profiles it (-cpuprofile, -tagfocus pass=restart).
func BenchmarkRestartPass(b *testing.B) {
	for _, agent := range newAgents {
		b.Run(agent, func(b *testing.B) {
			dir, h := benchHome(b, agent)
			path := filepath.Join(dir, "state.db")
			ctx := context.Background()
			start := func() (*state.Store, adapters.Adapter, tracker.PassReport) {
				st, err := state.Open(path, state.Options{})
				if err != nil {
					b.Fatal(err)
				}
				ad := idleAdapter(agent, h.Root)
				tr := tracker.New(tracker.Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: proc.NewHost(), Logger: zap.NewNop()})
				rep, err := tr.Reconcile(ctx, "startup")
				if err != nil {
					b.Fatal(err)
				}
				return st, ad, rep
			}
			st, ad, _ := start()
			cp := ad.(adapters.Checkpointer).Checkpoint()
			if err := st.SaveAdapterState(agent, cp.Put, cp.Del); err != nil {
				b.Fatal(err)
			}
			cp.Commit()
			st.Close()
			b.ReportAllocs()
			b.ResetTimer()
			pprof.Do(ctx, pprof.Labels("pass", "restart"), func(ctx context.Context) {
				for b.Loop() {
					st, _, rep := start()
					b.StopTimer()
					if rep.Created != 0 {
						b.Fatalf("a restart created %d records", rep.Created)
					}
					st.Close()
					b.StartTimer()
				}
			})
		})
	}
}

// BenchmarkFirstPass is a first start's own work over the agents
// scenario's home: an empty store, a new adapter, and the pass that
// reads every file and commits every session (the cold start, less the
// exec and the socket). Profile it with -cpuprofile, -tagfocus
// pass=first.
func BenchmarkFirstPass(b *testing.B) {
	for _, agent := range newAgents {
		b.Run(agent, func(b *testing.B) {
			dir, h := benchHome(b, agent)
			ctx := context.Background()
			b.ReportAllocs()
			b.SetBytes(h.Bytes)
			b.ResetTimer()
			n := 0
			pprof.Do(ctx, pprof.Labels("pass", "first"), func(ctx context.Context) {
				for b.Loop() {
					b.StopTimer()
					n++
					st, err := state.Open(filepath.Join(dir, fmt.Sprintf("state%d.db", n)), state.Options{})
					if err != nil {
						b.Fatal(err)
					}
					tr := tracker.New(tracker.Config{Store: st, Adapters: []adapters.Adapter{idleAdapter(agent, h.Root)}, Host: proc.NewHost(), Logger: zap.NewNop()})
					b.StartTimer()
					rep, err := tr.Reconcile(ctx, "first")
					b.StopTimer()
					if err != nil {
						b.Fatal(err)
					}
					if rep.Created != len(h.IDs) {
						b.Fatalf("first pass created %d records of %d sessions", rep.Created, len(h.IDs))
					}
					st.Close()
					b.StartTimer()
				}
			})
		})
	}
}
