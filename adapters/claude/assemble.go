package claude

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/claude/transcript"
	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/session"
)

// Evidence strings for owners and activity.
const (
	evidenceRegistry      = "registry"
	evidenceArgvResume    = "argv --resume"
	evidenceArgvSessionID = "argv --session-id"
	evidenceCwdMatch      = "cwd match, started before the session's last write"
	evidenceRegistryState = "registry status"
	evidenceTranscript    = "transcript tail"
	evidenceNoLiveOwner   = "no live owner seen"
)

// sessBuild gathers one session's evidence in one root.
type sessBuild struct {
	id      string
	root    *rootState
	file    *fileState
	entries []*regFile
	argv    []*claudeProc
}

// assemble turns the roots' state and the process view into observations:
// the sessions that are not quiet, built this pass, and the quiet ones as
// a set the tracker can skip while it is the same (quiet.go). The set is
// the cache's when it holds, else both are built in full.
func (a *Adapter) assemble(v *procView, shape uint64) ([]adapters.Observed, *adapters.QuietSet) {
	a.claimOwners(v)
	c := &a.quiet
	var out []adapters.Observed
	var live []liveOwner
	reused := false
	if c.valid {
		loud := a.loudIDs(v, c)
		for id := range c.forced {
			loud[id] = true
		}
		if sameSet(loud, c.loud) && quietShape(shape, loud, c) == c.shape {
			out, live = a.buildLoud(v, c)
			reused = true
			if quietCheck != nil {
				full, _ := a.buildAll(v)
				all := adapters.Observation{Sessions: out, Quiet: c.set}.All()
				slices.SortFunc(all, func(x, y adapters.Observed) int { return strings.Compare(x.UpstreamID, y.UpstreamID) })
				quietCheck(all, full)
			}
		}
	}
	if !reused {
		var all []adapters.Observed
		all, live = a.buildAll(v)
		a.indexFiles(c)
		c.loud, c.forced = a.loudIDs(v, c), map[string]bool{}
		// The quiet ones are kept in all's own array (in place: each goes
		// at or before where it was read): a 10,000-session first start
		// grew a second array of them by appending, 14 MB of garbage.
		quiet := all[:0]
		for _, o := range all {
			switch {
			case c.loud[o.UpstreamID]:
				out = append(out, o)
			case o.Stamp == 0:
				// Not quiet for a reason loudIDs does not see: built
				// afresh every pass, as the full build would.
				c.forced[o.UpstreamID], c.loud[o.UpstreamID] = true, true
				out = append(out, o)
			default:
				quiet = append(quiet, o)
			}
		}
		// A new set even when the same sessions came out quiet: the
		// tracker skips a set it decided, so a set is never handed out
		// for data it was not built from.
		c.set = adapters.NewQuietSet(slices.Clip(quiet))
		c.shape = quietShape(shape, c.loud, c)
		c.valid = true
	}
	a.stats.QuietReused += boolCount(reused)
	return a.attachOrphans(v, out, c.set, live), c.set
}

// attachOrphans adds each session's orphan processes as problems. A quiet
// session with orphans is returned among the others, a copy that shadows
// its entry in the set for this pass.
func (a *Adapter) attachOrphans(v *procView, out []adapters.Observed, set *adapters.QuietSet, live []liveOwner) []adapters.Observed {
	byID := func(x adapters.Observed, id string) int { return strings.Compare(x.UpstreamID, id) }
	for sid, issues := range a.orphans(v, a.registryTicks(v), live) {
		i, ok := slices.BinarySearchFunc(out, sid, byID)
		if !ok {
			q := set.Find(sid)
			if q == nil {
				a.log.Debug("orphan processes of a session not found", zap.String("session", sid), zap.Int("processes", len(issues)))
				continue
			}
			o := *q
			// Callers append to these: never into the set's.
			o.InFlight, o.Problems, o.Owners = slices.Clip(o.InFlight), slices.Clip(o.Problems), slices.Clip(o.Owners)
			out = slices.Insert(out, i, o)
		}
		out[i].Problems = append(out[i].Problems, issues...)
		out[i].Stamp = 0
	}
	for i := range out {
		if len(out[i].Problems) > 1 {
			// Sorted in a copy: the slice may be the set's.
			ps := slices.Clone(out[i].Problems)
			sort.Slice(ps, func(x, y int) bool { return ps[x].Key < ps[y].Key })
			out[i].Problems = ps
		}
	}
	return out
}

// quietCheck, set by tests, sees each reused pass's observations (all of
// them, the set's included) next to a full build of the same pass.
var quietCheck func(reused, full []adapters.Observed)

func boolCount(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// buildAll builds every session's observation, sorted by session id, and
// lists the owners seen alive.
func (a *Adapter) buildAll(v *procView) ([]adapters.Observed, []liveOwner) {
	// Sized for the transcripts read, the builds in one array: a first
	// start over 10,000 grew the map a dozen times and allocated each
	// build alone.
	n := a.filesRead()
	builds := make(map[buildKey]*sessBuild, n)
	order := make([]*sessBuild, 0, n)
	slab := make([]sessBuild, 0, n)
	get := func(r *rootState, id string) *sessBuild {
		k := buildKey{r, id}
		b := builds[k]
		if b == nil {
			if len(slab) < cap(slab) {
				slab = append(slab, sessBuild{id: id, root: r})
				b = &slab[len(slab)-1]
			} else {
				b = &sessBuild{id: id, root: r}
			}
			builds[k] = b
			order = append(order, b)
		}
		return b
	}
	rootByPath := map[string]*rootState{}
	for _, r := range a.roots {
		if !r.ok || !r.present {
			continue
		}
		rootByPath[r.path] = r
		for _, p := range r.projects {
			if !p.ok {
				continue
			}
			for _, f := range p.files {
				if f.read {
					get(r, f.id).file = f
				}
			}
		}
		if r.regsOK {
			for _, rf := range r.regs {
				if rf.entry != nil && rf.entry.SessionID != "" {
					b := get(r, rf.entry.SessionID)
					b.entries = append(b.entries, rf)
				}
			}
		}
	}
	// Live claude processes whose argv names a session.
	for id, cps := range v.byArgv {
		for _, cp := range cps {
			var b *sessBuild
			for _, ob := range order {
				if ob.id == id && (cp.root == "" || cp.root == ob.root.path) {
					b = ob
					break
				}
			}
			if b == nil {
				r := rootByPath[cp.root]
				if r == nil {
					continue // another root, or one that cannot be read now
				}
				b = get(r, id)
			}
			b.argv = append(b.argv, cp)
		}
	}
	return a.observeAll(order, v)
}

// readFiles yields the transcripts read, with their root, in the roots
// and projects that can be read.
func (a *Adapter) readFiles(yield func(*rootState, *fileState) bool) {
	for _, r := range a.roots {
		if !r.ok || !r.present {
			continue
		}
		for _, p := range r.projects {
			if !p.ok {
				continue
			}
			for _, f := range p.files {
				if f.read && !yield(r, f) {
					return
				}
			}
		}
	}
}

// filesRead counts readFiles.
func (a *Adapter) filesRead() int {
	n := 0
	for range a.readFiles {
		n++
	}
	return n
}

// buildKey names one session in one root.
type buildKey struct {
	root *rootState
	id   string
}

// observeAll observes the builds, listed in the order found: a
// session found in two roots is observed once, its two builds merged.
func (a *Adapter) observeAll(order []*sessBuild, v *procView) ([]adapters.Observed, []liveOwner) {
	// Sorted by session id now, so the output needs no sort of its own.
	slices.SortFunc(order, func(x, y *sessBuild) int { return strings.Compare(x.id, y.id) })
	var live []liveOwner
	out := make([]adapters.Observed, 0, len(order))
	index := make(map[string]int, len(order))
	for _, b := range order {
		o, lo := a.observeFile(b, v)
		live = append(live, lo...)
		if i, ok := index[o.UpstreamID]; ok {
			out[i] = merge(out[i], o)
			out[i].Stamp = 0
			continue
		}
		index[o.UpstreamID] = len(out)
		out = append(out, o)
	}
	return out, live
}

// observeFile is observe for the common case of a history: a session seen
// only in its transcript, which no registry entry or argv names and no
// live claude may own from its cwd. Its Observed then depends on the file
// alone, so it is built once per change of the file and reused, with a
// Stamp that tells the tracker it is unchanged. Any other session is
// built afresh each pass, unstamped.
func (a *Adapter) observeFile(b *sessBuild, v *procView) (adapters.Observed, []liveOwner) {
	f := b.file
	if f == nil || len(b.entries) > 0 || len(b.argv) > 0 ||
		(v.snap != nil && f.sum.Cwd != "" && len(v.byCwd) > 0 && len(v.byCwd[f.cwdKey()]) > 0) {
		return a.observe(b, v)
	}
	if f.obs == nil || f.obsGen != f.gen {
		o, live := a.observe(b, v)
		if len(live) > 0 { // cannot happen without owners; never cache it
			return o, live
		}
		a.stamp++
		o.Stamp = a.stamp
		f.obs, f.obsGen = &o, f.gen
	}
	o := *f.obs
	// Callers append to these (merge, orphans): never into the cache.
	o.InFlight = slices.Clip(o.InFlight)
	o.Problems = slices.Clip(o.Problems)
	o.Owners = slices.Clip(o.Owners)
	return o, nil
}

// observe builds one Observed and lists its owners seen alive.
func (a *Adapter) observe(b *sessBuild, v *procView) (adapters.Observed, []liveOwner) {
	// Source is the most specific input the session lives in (its project
	// dir), so an unreadable project dir flags exactly its own sessions.
	o := adapters.Observed{UpstreamID: b.id, Source: b.root.path, Root: b.root.path}
	var sum *transcript.Summary
	if b.file != nil {
		o.Source = b.file.dir
		if o.Source == "" {
			o.Source = filepath.Dir(b.file.path)
		}
		sum = &b.file.sum
		o.Cwd = sum.Cwd
		o.Title = sum.Title
		o.LastActivity = sum.Last
		if o.LastActivity.IsZero() {
			o.LastActivity = b.file.mtime
		}
	}
	live := a.observeEntries(&o, b, v)
	live = observeArgv(&o, b, live)
	if len(o.Owners) == 0 && v.snap != nil && sum != nil && sum.Cwd != "" {
		live = inferCwdOwners(&o, b, v, sum, live)
	}
	if o.ActivityEvidence == "" {
		transcriptActivity(&o, sum, live)
	}
	if w := o.WaitingFor; w != nil && w.Kind == session.WaitingQuestion && w.Question == "" && sum != nil {
		// The registry says a question ("input needed"); its words are
		// in the pending AskUserQuestion call.
		if q := pendingQuestion(sum); q != nil {
			w.Question = q.Input
		}
	}
	if sum != nil {
		o.InFlight = append(inFlight(sum), o.InFlight...)
	}
	if is, ok := sessionDrift(b, sum); ok {
		o.Problems = append(o.Problems, is)
	}
	return o, live
}

// sessionDrift is the format_drift problem of a session whose transcript
// or registry entries hold what sessiond does not understand.
func sessionDrift(b *sessBuild, sum *transcript.Summary) (adapters.Issue, bool) {
	var seen kit.Seen
	version := ""
	if sum != nil {
		seen, version = sum.Drift(), sum.Version
	}
	for _, rf := range b.entries {
		if e := rf.entry; e != nil && !e.drift.Empty() {
			seen.Union(e.drift)
			if version == "" {
				version = e.Version
			}
		}
	}
	return seen.Problem("claude", version)
}

// transcriptActivity is the activity of a session no registry status
// gives: the transcript's tail while an owner lives.
func transcriptActivity(o *adapters.Observed, sum *transcript.Summary, live []liveOwner) {
	anyLive := len(live) > 0
	for _, ow := range o.Owners {
		anyLive = anyLive || ow.Inferred // inferred owners come from the snapshot: alive
	}
	switch {
	case anyLive && sum != nil:
		o.Activity = tailActivity(sum)
		o.ActivityEvidence = evidenceTranscript
		o.ActivitySource = session.SourceTranscript
		if q := pendingQuestion(sum); q != nil {
			// The call blocks on the user's answer: waiting, not busy.
			o.Activity = session.ActivityWaiting
			o.ActivityEvidence += " (an AskUserQuestion call waits for its answer)"
			o.WaitingFor = &session.WaitingFor{Kind: session.WaitingQuestion, Question: q.Input}
		}
	case anyLive:
		o.Activity = session.ActivityUnknown
		o.ActivityEvidence = "no status and no transcript yet"
	default:
		o.Activity = session.ActivityUnknown
		o.ActivityEvidence = evidenceNoLiveOwner
	}
}

// registryWaiting is what a registry's waitingFor words mean (2.1.328:
// "permission prompt", "input needed" for AskUserQuestion, "dialog open",
// "sandbox request", "worker request", "goal proposal").
func registryWaiting(words string) *session.WaitingFor {
	switch words {
	case "permission prompt":
		return &session.WaitingFor{Kind: session.WaitingPermission, Detail: words}
	case "input needed":
		return &session.WaitingFor{Kind: session.WaitingQuestion, Detail: words}
	}
	return &session.WaitingFor{Kind: session.WaitingOther, Detail: words}
}

func registryActivity(status string) (session.Activity, bool) {
	switch status {
	case "busy":
		return session.ActivityBusy, true
	case "idle", "shell":
		// "shell": the turn ended and a background job (a Bash tool run in
		// the background) still runs; the session waits for the user.
		return session.ActivityIdle, true
	case "waiting":
		return session.ActivityWaiting, true
	}
	return "", false
}

// tailActivity is what the last turn says the session does.
// pendingQuestion is the newest call of the last turn still waiting for
// its result if it is an AskUserQuestion (its Input holds the question),
// else nil.
func pendingQuestion(s *transcript.Summary) *transcript.ToolCall {
	if s.State != transcript.TurnAssistant || len(s.Pending) == 0 {
		return nil
	}
	if tc := &s.Pending[len(s.Pending)-1]; tc.Name == transcript.AskUserQuestion {
		return tc
	}
	return nil
}

func tailActivity(s *transcript.Summary) session.Activity {
	switch s.State {
	case transcript.TurnPrompt, transcript.TurnToolResult:
		return session.ActivityBusy
	case transcript.TurnAssistant:
		if len(s.Pending) > 0 {
			return session.ActivityBusy
		}
		return session.ActivityIdle
	case transcript.TurnInterrupted:
		return session.ActivityIdle
	}
	return session.ActivityUnknown
}

// maxNamedToolCalls is how many calls without results are named one by
// one; the rest are counted in one problem.
const maxNamedToolCalls = 5

// inFlight lists the last turn's unfinished work: tool calls without
// results, a prompt without a reply, tool results the model never answered.
func inFlight(s *transcript.Summary) []adapters.Issue {
	var out []adapters.Issue
	// Name the newest few; one problem counts the rest, so a transcript
	// with dozens of unanswered calls does not bury the session's list.
	named := s.Pending
	if len(named) > maxNamedToolCalls {
		named = named[len(named)-maxNamedToolCalls:]
	}
	if rest := s.Pending[:len(s.Pending)-len(named)]; len(rest) > 0 || s.PendingDropped > 0 {
		n := len(rest) + s.PendingDropped
		is := adapters.Issue{Kind: session.ProblemOrphanedToolCall, Key: "more",
			Detail: fmt.Sprintf("%d more tool calls without results", n)}
		if len(rest) > 0 {
			is.Since = rest[0].At
			if s.PendingDropped == 0 {
				is.Detail += fmt.Sprintf(", the oldest %s", rest[0].Name)
			}
		}
		out = append(out, is)
	}
	for _, tc := range named {
		d := tc.Name
		if tc.Input != "" {
			d += ": " + tc.Input
		}
		out = append(out, adapters.Issue{Kind: session.ProblemOrphanedToolCall, Key: tc.ID, Detail: d + " (no result)", Since: tc.At})
	}
	switch s.State {
	case transcript.TurnPrompt:
		if s.Prompt != nil {
			out = append(out, adapters.Issue{Kind: session.ProblemIncompleteMessage, Key: "prompt:" + s.Prompt.UUID, Detail: "prompt got no reply: " + s.Prompt.Prompt, Since: s.Prompt.Time})
		}
	case transcript.TurnToolResult:
		if len(s.Pending) == 0 {
			out = append(out, adapters.Issue{Kind: session.ProblemIncompleteMessage, Key: "reply:" + s.StateUUID, Detail: "tool results were sent; the assistant's reply never came", Since: s.StateAt})
		}
	}
	return out
}

// merge joins two observations of one session found in two roots: the one
// with a transcript and the later activity leads; owners and issues join.
func merge(x, y adapters.Observed) adapters.Observed {
	lead, other := x, y
	if y.LastActivity.After(x.LastActivity) {
		lead, other = y, x
	}
	for _, o := range other.Owners {
		lead.Owners = appendOwner(lead.Owners, o)
	}
	lead.InFlight = appendIssues(lead.InFlight, other.InFlight)
	lead.Problems = appendIssues(lead.Problems, other.Problems)
	if lead.ActivityEvidence == evidenceNoLiveOwner && other.ActivityEvidence != evidenceNoLiveOwner {
		lead.Activity, lead.ActivityEvidence = other.Activity, other.ActivityEvidence
	}
	return lead
}

func appendIssues(dst, src []adapters.Issue) []adapters.Issue {
	for _, s := range src {
		dup := false
		for _, d := range dst {
			if d.Kind == s.Kind && d.Key == s.Key {
				dup = true
				break
			}
		}
		if !dup {
			dst = append(dst, s)
		}
	}
	return dst
}
