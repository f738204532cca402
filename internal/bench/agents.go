package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sessiond/sessiond/api"
)

// agentData writes, once per run, the home of one of the newer agents.
func (r *runner) agentData(agent string) (*agentHome, error) {
	if h := r.agentHomes[agent]; h != nil {
		return h, nil
	}
	dir, err := r.dir("a" + agent)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	seed := uint64(40 + slices.Index(newAgents, agent))
	h, err := writeAgentHome(agent, dir, agentSpec{Sessions: r.opt.AgentSessions, Projects: r.opt.AgentProjects,
		MaxTurns: r.opt.AgentTurns, InFlightEvery: 20, Seed: seed})
	if err != nil {
		r.cleanup(dir)
		return nil, fmt.Errorf("write the %s home: %w", agent, err)
	}
	took := time.Since(t0)
	r.opt.Log("wrote the %s home (%d sessions, %d files, %s) in %s", agent, len(h.IDs), h.Files, Bytes(h.Bytes), took.Round(time.Millisecond))
	r.add(r.current, agent+": data", fmt.Sprintf("%d sessions, %d turns, %d files, %s (%s per session) in %d project folders; %d end mid tool call",
		len(h.IDs), h.Turns, h.Files, Bytes(h.Bytes), Bytes(float64(h.Bytes)/float64(max(1, len(h.IDs)))), r.opt.AgentProjects, h.InFlight), "", nil,
		fmt.Sprintf("bench.writeAgentHome: the agent's own layout and line shapes (docs/agents/%s.md, the adapter's testdata), 1-%d turns per session (log-uniform), each a shell call with 512 B-16 KiB of output (log-uniform) and the model's answer; mtimes in the past; written in %s, then synced",
			agent, r.opt.AgentTurns, dur(took)))
	if r.agentHomes == nil {
		r.agentHomes = map[string]*agentHome{}
	}
	r.agentHomes[agent] = h
	r.later(func() { r.cleanup(dir) })
	return h, nil
}

// agents: for each of the newer agents alone, on its home: the cold first
// start beside its floor, the CPU of the idle daemon, and the restarts.
func (r *runner) agents(ctx context.Context) error {
	var errs []error
	for _, agent := range r.opt.Agents {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.opt.Log("agents: %s (load average %s)", agent, LoadAverage())
		if err := r.agentRun(ctx, agent); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", agent, err))
		}
	}
	return errors.Join(errs...)
}

func (r *runner) agentRun(ctx context.Context, agent string) error {
	h, err := r.agentData(agent)
	if err != nil {
		return err
	}
	n := len(h.IDs)
	cfg := daemonConfig{AgentDirs: map[string]string{agent: h.Root}}
	dir, err := r.dir("c" + agent)
	if err != nil {
		return err
	}
	defer r.cleanup(dir)
	cache := r.dropCaches()
	d, err := r.startDaemon(dir, cfg)
	if err != nil {
		return err
	}
	defer d.Stop()
	cold, err := d.WaitComplete(ctx, n, 5*time.Minute)
	if err != nil {
		return err
	}
	st, err := procStats(d)
	if err != nil {
		return err
	}
	ss, err := d.Sessions(ctx)
	if err != nil {
		return err
	}
	if err := checkListed(ss, map[string][]string{agent: h.IDs}); err != nil {
		return err
	}
	r.add("agents", agent+": first complete ls, empty store (cold start)", dur(cold), "", nil,
		fmt.Sprintf("sessiond exec to the first GET /v1/sessions?all=true listing every session; only this agent's home; %s", cache))
	counts := countByStatus(ss)
	r.add("agents", agent+": sessions listed", fmt.Sprintf("%d of %d, their ids; %d stopped, %d interrupted (want %d, %d)", len(ss), n, counts["stopped"], counts["interrupted"], n-h.InFlight, h.InFlight),
		"all", ptr(counts["stopped"] == n-h.InFlight && counts["interrupted"] == h.InFlight),
		"GET /v1/sessions?all=true after the first complete ls: each generated id listed once as this agent's; the statuses check the data is read as meant (no owner lives: a session ending mid tool call is interrupted)")
	r.add("agents", agent+": CPU time and bytes read to that ls", fmt.Sprintf("%.2f s (threads waited %s for a CPU); rchar %s (%s per session of %s)",
		st.CPUSeconds, dur(st.RunQueueWait), Bytes(st.ReadChars), Bytes(float64(st.ReadChars)/float64(n)), Bytes(float64(h.Bytes)/float64(n))), "", nil,
		"utime+stime and rchar from /proc/<pid>/stat and io after the first complete ls")

	// Idle: the daemon left alone after settling.
	select {
	case <-time.After(r.opt.Settle):
	case <-ctx.Done():
		return ctx.Err()
	}
	iw, err := idleWindow(ctx, d, r.opt.SteadyFor)
	if err != nil {
		return err
	}
	passes := sumSuffix(iw.m1, "sessiond_reconcile_duration_seconds_count") - sumSuffix(iw.m0, "sessiond_reconcile_duration_seconds_count")
	hints := iw.m1[`sessiond_reconcile_duration_seconds_count{trigger="hint"}`] - iw.m0[`sessiond_reconcile_duration_seconds_count{trigger="hint"}`]
	passTime := sumSuffix(iw.m1, "sessiond_reconcile_duration_seconds_sum") - sumSuffix(iw.m0, "sessiond_reconcile_duration_seconds_sum")
	avg := time.Duration(0)
	if passes > 0 {
		avg = time.Duration(passTime / passes * float64(time.Second))
	}
	r.add("agents", agent+": CPU while idle", fmt.Sprintf("%.2f %% of one core (%.0f passes of %s on average, %.0f on change hints; rchar %s; RSS %s)", iw.cpu, passes, dur(avg), hints,
		Bytes(iw.s1.ReadChars-iw.s0.ReadChars), Bytes(iw.s1.RSS)), "≤ 0.3 %", ptr(iw.cpu <= 0.3),
		fmt.Sprintf("%d sessions, default --reconcile-interval; window of %s after %s settling; utime+stime from /proc/<pid>/stat; passes (wall time) by trigger from /metrics; rchar is the /proc scans", n, iw.el.Round(time.Second), r.opt.Settle))
	d.Stop()

	// The floor: the same files read bare, as the adapter's first read
	// needs them.
	f, err := r.readFloorWith(func(emit func(string)) error { return listLayout(h.Root, h.floor.Levels, emit) },
		func(p string, buf []byte) (int64, error) { return readLayout(p, buf, h.floor) }, h.floor.Extra)
	if err != nil {
		return err
	}
	if f.Errs > 0 {
		return fmt.Errorf("floor: %d of %d files could not be read, first: %s", f.Errs, f.Files, f.FirstErr)
	}
	total, err := r.addFloorRows("agents", agent+": floor, the same files read bare", h.floor.Says+fmt.Sprintf("; %d reads in flight", floorReaders), cold, f)
	if err != nil {
		return err
	}
	ratio := float64(cold) / float64(total)
	r.add("agents", agent+": cold start against its floor", fmt.Sprintf("%.2f× (%s against %s)", ratio, dur(cold), dur(total)), "≤ 1.3×", ptr(ratio <= 1.3),
		"the cold start above divided by the floor with the exec: what sessiond adds to reading the bytes")

	// Restarts on the same home.
	rdir, err := r.dir("r" + agent)
	if err != nil {
		return err
	}
	defer r.cleanup(rdir)
	return r.restartSeries(ctx, fmt.Sprintf("%s, %d sessions", agent, n), rdir, cfg, n, 100*time.Millisecond)
}

// seven: one daemon over every agent's home at once: the standard Claude
// home, the OpenCode database, the Codex home and the four newer homes.
func (r *runner) seven(ctx context.Context) error {
	root, hist, err := r.homeData()
	if err != nil {
		return err
	}
	if !r.homeRowDone {
		data, how := r.homeDataRow()
		r.add("seven", "claude: data, the standard home", data, "", nil, how)
		r.homeRowDone = true
	}
	ocDir, ocIDs, err := r.openCodeData()
	if err != nil {
		return err
	}
	cx, err := r.codexData()
	if err != nil {
		return err
	}
	want := map[string][]string{"opencode": ocIDs, "codex": cx.IDs}
	cfg := daemonConfig{ClaudeDirs: []string{root.Dir}, OpenCodeDir: ocDir, CodexDir: cx.Root, AgentDirs: map[string]string{}}
	for _, agent := range newAgents {
		h, err := r.agentData(agent)
		if err != nil {
			return err
		}
		cfg.AgentDirs[agent] = h.Root
		want[agent] = h.IDs
	}
	n := len(hist.Paths)
	for _, ids := range want {
		n += len(ids)
	}
	dir, err := r.dir("seven")
	if err != nil {
		return err
	}
	defer r.cleanup(dir)
	cache := r.dropCaches()
	d, err := r.startDaemon(dir, cfg)
	if err != nil {
		return err
	}
	defer d.Stop()
	cold, err := d.WaitComplete(ctx, n, 10*time.Minute)
	if err != nil {
		return err
	}
	st0, err := procStats(d)
	if err != nil {
		return err
	}
	ss, err := d.Sessions(ctx)
	if err != nil {
		return err
	}
	// Claude's ids are the transcripts' names.
	var claudeIDs []string
	for _, p := range hist.Paths {
		claudeIDs = append(claudeIDs, strings.TrimSuffix(filepath.Base(p), ".jsonl"))
	}
	want["claude"] = claudeIDs
	if err := checkListed(ss, want); err != nil {
		return err
	}
	var per []string
	for _, a := range []string{"claude", "opencode", "codex", "gemini", "qwen", "pi", "copilot"} {
		per = append(per, fmt.Sprintf("%s %d", a, len(want[a])))
	}
	r.add("seven", "first complete ls, all seven homes, empty store", fmt.Sprintf("%s, %d sessions (%s), %.2f s CPU", dur(cold), len(ss), strings.Join(per, ", "), st0.CPUSeconds), "", nil,
		"one daemon given every home; each generated id listed once under its agent; "+cache)
	// Idle as the memory scenario's daemon is when measured: after the
	// settling and the steady window.
	idleFor := r.opt.Settle + r.opt.SteadyFor
	if err := sleepCtx(ctx, r.opt.Settle); err != nil {
		return err
	}
	st1, err := procStats(d)
	if err != nil {
		return err
	}
	if err := sleepCtx(ctx, r.opt.SteadyFor); err != nil {
		return err
	}
	st, err := procStats(d)
	if err != nil {
		return err
	}
	r.add("seven", "idle CPU, all seven homes", fmt.Sprintf("%.2f %% of a core", 100*(st.CPUSeconds-st1.CPUSeconds)/r.opt.SteadyFor.Seconds()), "", nil,
		fmt.Sprintf("/proc/<pid>/stat utime+stime over %s, from %s after the first complete ls (nothing changes, no agent runs)", r.opt.SteadyFor, r.opt.Settle))
	heap := ""
	if m, err := metrics(ctx, d.Socket); err == nil {
		heap = fmt.Sprintf("; Go heap live %s, in use %s, idle and kept %s", Bytes(m["go_gc_heap_live_bytes"]), Bytes(m["go_memstats_heap_inuse_bytes"]), Bytes(m["go_memstats_heap_idle_bytes"]-m["go_memstats_heap_released_bytes"]))
	}
	r.add("seven", fmt.Sprintf("RSS with all seven homes, %d sessions", len(ss)), fmt.Sprintf("%s idle (anonymous %s, files %s%s), peak %s", Bytes(st.RSS), Bytes(st.RSSAnon), Bytes(st.RSSFile), heap, Bytes(st.PeakRSS)), "≤ 100 MiB",
		ptr(st.RSS <= 100<<20 && st.PeakRSS <= 100<<20),
		fmt.Sprintf("/proc/<pid>/status VmRSS (RssAnon, RssFile) %s after the first complete ls, and VmHWM (the cold discovery's peak); the heap from /metrics; verdict on both", idleFor))
	return nil
}

// checkListed checks that the list holds exactly the ids want names, by
// agent, each once.
func checkListed(ss []api.Session, want map[string][]string) error {
	got := map[string]map[string]int{}
	for _, s := range ss {
		if got[s.Agent] == nil {
			got[s.Agent] = map[string]int{}
		}
		got[s.Agent][s.UpstreamID]++
	}
	var bad []string
	for agent, ids := range want {
		missing, twice := 0, 0
		for _, id := range ids {
			switch got[agent][id] {
			case 0:
				missing++
			case 1:
			default:
				twice++
			}
		}
		if missing > 0 || twice > 0 || len(got[agent]) != len(ids) {
			bad = append(bad, fmt.Sprintf("%s: %d listed, want %d (%d missing, %d more than once)", agent, len(got[agent]), len(ids), missing, twice))
		}
	}
	for agent, m := range got {
		if _, ok := want[agent]; !ok {
			bad = append(bad, fmt.Sprintf("%s: %d sessions listed, none expected", agent, len(m)))
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return fmt.Errorf("the list is not the data: %s", strings.Join(bad, "; "))
	}
	return nil
}

func countByStatus(ss []api.Session) map[string]int {
	m := map[string]int{}
	for _, s := range ss {
		m[string(s.Status)]++
	}
	return m
}

// listLayout emits the files under root that levels name (see
// floorLayout), listing each folder as it goes.
func listLayout(root string, levels []string, emit func(string)) error {
	if len(levels) == 0 {
		return nil
	}
	lv := levels[0]
	if len(levels) == 1 {
		ents, err := os.ReadDir(root)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if !e.Type().IsRegular() {
				continue
			}
			for _, pat := range strings.Split(lv, "|") {
				if ok, _ := filepath.Match(pat, e.Name()); ok {
					emit(filepath.Join(root, e.Name()))
					break
				}
			}
		}
		return nil
	}
	if lv != "*" {
		return listLayout(filepath.Join(root, lv), levels[1:], emit)
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			if err := listLayout(filepath.Join(root, e.Name()), levels[1:], emit); err != nil {
				return err
			}
		}
	}
	return nil
}

// readLayout reads one file as the layout says: whole, in pieces of buf,
// or its head and tail windows.
func readLayout(path string, buf []byte, l floorLayout) (int64, error) {
	fh, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return 0, err
	}
	size := fi.Size()
	var total int64
	if l.Whole {
		for {
			n, err := fh.Read(buf)
			total += int64(n)
			if err == io.EOF {
				return total, nil
			}
			if err != nil {
				return total, err
			}
		}
	}
	for off, end := int64(0), min(l.Head, size); off < end; {
		n, err := fh.ReadAt(buf[:min(int64(len(buf)), end-off)], off)
		total += int64(n)
		off += int64(n)
		if err != nil {
			return total, err
		}
	}
	if size > l.Head {
		off := max(l.Head, size-l.Tail)
		for off < size {
			n, err := fh.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
			total += int64(n)
			off += int64(n)
			if err != nil && err != io.EOF {
				return total, err
			}
			if n == 0 {
				break
			}
		}
	}
	return total, nil
}
