package opencode

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/session"
)

var (
	_ adapters.Repairer = (*Adapter)(nil)
	_ adapters.Aborter  = (*Adapter)(nil)
)

// repairMode says what a repair may do.
type repairMode struct {
	apply bool
	// abort: the user asked to stop a busy turn now, so the grace window
	// does not apply to the server rung.
	abort bool
	// offlineOnly skips the server rung (the automatic policy).
	offlineOnly bool
}

// PlanRepair lists what a repair would do, following the ladder of
// docs/agents/opencode.md: through a reachable server's API when one
// has the session; else offline, when no process holds the database;
// else nothing, with a pending step naming the holders.
func (a *Adapter) PlanRepair(ctx context.Context, t adapters.RepairTarget) ([]session.Step, error) {
	return a.repair(ctx, t, repairMode{offlineOnly: t.OfflineOnly})
}

// ApplyRepair plans again and carries out what is still safe. A repaired
// session plans nothing.
func (a *Adapter) ApplyRepair(ctx context.Context, t adapters.RepairTarget) ([]session.Step, error) {
	return a.repair(ctx, t, repairMode{apply: true, offlineOnly: t.OfflineOnly})
}

// Abort gets a session stuck busy going again. Busy on a server: reject
// its pending question or permission, abort the turn, wait (bounded) for
// idle, patch the tool parts still in flight. Not busy anywhere (the owner
// is dead, or idle with stale data): the same as ApplyRepair.
func (a *Adapter) Abort(ctx context.Context, t adapters.RepairTarget) ([]session.Step, error) {
	return a.repair(ctx, t, repairMode{apply: true, abort: true})
}

func (a *Adapter) repair(ctx context.Context, t adapters.RepairTarget, m repairMode) ([]session.Step, error) {
	id := t.UpstreamID
	if !validID(id) {
		return nil, fmt.Errorf("%q is not an OpenCode session id", id)
	}
	a.repairMu.Lock()
	defer a.repairMu.Unlock()

	dbPath, err := a.locate(ctx, t)
	if err != nil {
		return nil, err
	}
	if dbPath == "" {
		if ok, _ := legacyExists(a.legacy.root, id); ok {
			return []session.Step{session.StepSkipped("leave legacy storage", a.legacy.root,
				"the session is in the JSON storage of opencode <= 1.1, which sessiond does not rewrite; OpenCode migrates it to SQLite on its next start")}, nil
		}
		return []session.Step{session.StepSkipped("find session", id,
			"no OpenCode database in "+a.cfg.DataDir+" has this session (deleted?)")}, nil
	}
	f, err := a.readFlightRO(ctx, dbPath, id)
	if err != nil {
		return nil, err
	}
	if !f.found {
		return []session.Step{session.StepSkipped("find session", id, "no longer in "+dbPath)}, nil
	}
	why := ""
	if m.offlineOnly {
		why = "the automatic policy repairs offline only"
	} else {
		sv, err := a.serverFor(ctx, id, t.Cwd)
		if err != nil {
			return []session.Step{session.StepFailed("ask OpenCode server", id,
				"a server has the session but answers errors; nothing written", err)}, nil
		}
		if sv != nil {
			return a.viaServer(ctx, sv, t, dbPath, f, m), nil
		}
	}
	if f.empty() {
		return []session.Step{nothingInFlight(id)}, nil
	}
	if why == "" {
		why = "no reachable server has the session"
	}
	return a.offline(ctx, dbPath, id, f, m.apply, why)
}

func nothingInFlight(id string) session.Step {
	return session.StepSkipped("nothing in flight", id,
		"no tool part is pending or running and every assistant message is completed")
}

// locate finds the database holding the session: the one it was last seen
// in, else any opencode*.db of the data dir that has it. "" when none has.
func (a *Adapter) locate(ctx context.Context, t adapters.RepairTarget) (string, error) {
	if src := t.Source; src != "" && strings.HasPrefix(filepath.Base(src), "opencode") && strings.HasSuffix(src, ".db") {
		if fi, err := os.Stat(src); err == nil && fi.Mode().IsRegular() {
			ok, err := sessionExists(ctx, src, a.cfg.BusyTimeout, t.UpstreamID)
			if err != nil {
				return "", fmt.Errorf("%s: %w", src, err)
			}
			if ok {
				return src, nil
			}
		}
	}
	paths, err := a.databases()
	if err != nil {
		return "", err
	}
	var errs []error
	for _, p := range paths {
		ok, err := sessionExists(ctx, p, a.cfg.BusyTimeout, t.UpstreamID)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			continue
		}
		if ok {
			return p, nil
		}
	}
	if len(errs) > 0 {
		// Unknown is not "not found": a locked database may have it.
		return "", errors.Join(errs...)
	}
	return "", nil
}

// liveServer is a server that answered for the session.
type liveServer struct {
	srv    serverInfo
	url    string
	status statusEntry
}

func (s *liveServer) busy() bool { return s.status.Type != "" && s.status.Type != "idle" }

// on names the server in a step's detail.
func (s *liveServer) on() string { return " on " + s.url }

// serverFor finds a reachable server that has the session, preferring one
// that reports it busy (its owner). A server that cannot be reached (gone
// since the last pass), or that is no longer this user's (checkServer:
// another user may listen on its port now), is passed over; one that
// answers errors is reported, so that nothing is written behind a live
// server's back.
func (a *Adapter) serverFor(ctx context.Context, id, dir string) (*liveServer, error) {
	var found *liveServer
	var failed []error
	for _, s := range a.lastServers() {
		if err := a.checkServer(s); err != nil {
			a.log.Warn("OpenCode server passed over for a repair: not trusted now", zap.String("url", s.URL), zap.Error(err))
			continue
		}
		err := a.get(ctx, s.URL, "/session/"+url.PathEscape(id), dir, nil)
		var he *httpError
		switch {
		case err == nil:
		case errors.As(err, &he) && he.Code == http.StatusNotFound:
			continue
		case errors.As(err, &he):
			failed = append(failed, fmt.Errorf("server %s: GET /session/%s: %w", s.URL, id, err))
			continue
		default:
			continue
		}
		st, err := a.sessionStatus(ctx, s.URL, dir)
		if err != nil {
			failed = append(failed, fmt.Errorf("server %s: GET /session/status: %w", s.URL, err))
			continue
		}
		ls := &liveServer{srv: s, url: s.URL, status: st[id]}
		if ls.busy() {
			return ls, nil
		}
		if found == nil {
			found = ls
		}
	}
	if found != nil {
		return found, nil
	}
	return nil, errors.Join(failed...)
}

// serverPart is a tool part as a server returns it: parsed, and the whole
// object, which a PATCH sends back with its state replaced.
type serverPart struct {
	ocPart
	obj map[string]any
}

// pendingRequest is a pending question or permission of the session.
type pendingRequest struct {
	kind string // "question" or "permission"
	id   string
}

// pendingRequests lists the session's pending questions and permissions.
func (a *Adapter) pendingRequests(ctx context.Context, base, id, dir string) ([]pendingRequest, error) {
	var out []pendingRequest
	for _, kind := range []string{"question", "permission"} {
		var list []struct {
			ID        string `json:"id"`
			SessionID string `json:"sessionID"`
		}
		if err := a.get(ctx, base, "/"+kind, dir, &list); err != nil {
			return nil, fmt.Errorf("GET /%s: %w", kind, err)
		}
		for _, q := range list {
			if q.SessionID == id && q.ID != "" {
				out = append(out, pendingRequest{kind: kind, id: q.ID})
			}
		}
	}
	return out, nil
}

// serverParts fetches the messages that hold in-flight tool parts (known
// from the database, so a long session is not downloaded whole) and
// returns the parts the server still shows pending or running.
func (a *Adapter) serverParts(ctx context.Context, base, id, dir string, f *flight) ([]serverPart, error) {
	seen := map[string]bool{}
	var out []serverPart
	for _, fp := range f.parts {
		if seen[fp.MessageID] {
			continue
		}
		seen[fp.MessageID] = true
		var msg struct {
			Parts []rawJSON `json:"parts"`
		}
		path := "/session/" + url.PathEscape(id) + "/message/" + url.PathEscape(fp.MessageID)
		if err := a.get(ctx, base, path, dir, &msg); err != nil {
			var he *httpError
			if errors.As(err, &he) && he.Code == http.StatusNotFound {
				continue // deleted meanwhile
			}
			return nil, fmt.Errorf("GET %s: %w", path, err)
		}
		for _, raw := range msg.Parts {
			p, err := parsePart(raw)
			if err != nil || !p.InFlight() {
				continue
			}
			obj, err := decodeObject(raw)
			if err != nil {
				continue
			}
			if p.MessageID == "" {
				p.MessageID = fp.MessageID
			}
			out = append(out, serverPart{ocPart: p, obj: obj})
		}
	}
	return out, nil
}

// rawJSON keeps a value's bytes for a second decoding.
type rawJSON []byte

func (r *rawJSON) UnmarshalJSON(b []byte) error {
	*r = append((*r)[:0], b...)
	return nil
}

// viaServer is rung 1 of the ladder: everything goes through the server's
// own API, so every OpenCode client sees it as OpenCode's own events.
func (a *Adapter) viaServer(ctx context.Context, sv *liveServer, t adapters.RepairTarget, dbPath string, f *flight, m repairMode) []session.Step {
	id, dir := t.UpstreamID, t.Cwd
	if wait := a.serverWait(sv, dbPath, f, m); wait != nil {
		return wait
	}
	reqs, err := a.pendingRequests(ctx, sv.url, id, dir)
	if err != nil {
		return []session.Step{serverFailed(sv, "list pending questions and permissions", err)}
	}
	parts, err := a.serverParts(ctx, sv.url, id, dir, f)
	if err != nil {
		return []session.Step{serverFailed(sv, "read in-flight tool parts", err)}
	}

	head := a.rejectPlan(sv, dir, reqs)
	if sv.busy() {
		head = append(head, a.abortPlan(sv, id, dir))
	}
	patches := a.patchPlan(sv, dir, parts)
	if len(head) == 0 && len(patches) == 0 && len(f.msgs) == 0 {
		return []session.Step{nothingInFlight(id)}
	}
	if !m.apply {
		return append(adapters.DryRun(append(head, patches...)), openMessageSteps(f)...)
	}
	// Checked again right before writing: the reads above take time.
	if err := a.checkServer(sv.srv); err != nil {
		return []session.Step{serverFailed(sv, "check server", err)}
	}

	// Apply in order; the first failure stops the rest, which are
	// reported as not attempted.
	if !sv.busy() {
		done, err := adapters.Apply(ctx, append(head, patches...))
		if err != nil {
			return done
		}
		return a.withOpenMessages(ctx, done, dbPath, id)
	}
	done, err := adapters.Apply(ctx, head)
	if err != nil {
		return append(done, adapters.NotAttempted(patches)...)
	}
	return a.afterAbort(ctx, sv, t, dbPath, f, done)
}

// serverWait is the pending step of a server repair that must not run
// now, nil when it may.
func (a *Adapter) serverWait(sv *liveServer, dbPath string, f *flight, m repairMode) []session.Step {
	// Every server answers for every session of the database, its own or
	// not. One that is not running this session may sit beside the process
	// that is (an `opencode run` holds the database and opens no port):
	// patching through the server would write behind that process's back.
	if !sv.busy() {
		if held, who := a.heldByOthers(dbPath); held {
			return []session.Step{session.StepPending("repair through server", sv.url,
				"pending: "+who+", not a server; the session may still be running there, so nothing is written")}
		}
	}
	if !m.abort {
		if age := a.cfg.Now().Sub(f.lastWrite); age < a.cfg.RepairGrace && (sv.busy() || !f.empty()) {
			return []session.Step{session.StepPending("repair through server", sv.url,
				fmt.Sprintf("pending: the session (server status %s) was written %s ago; it is repaired only once still for %s (sessionctl abort stops a busy turn now)",
					orDash(sv.status.Type), age.Round(time.Second), a.cfg.RepairGrace))}
		}
	}
	return nil
}

// afterAbort follows an abort the server took: it waits (bounded) for
// the session to go idle, patches the tool parts still in flight then,
// and, when the session stayed busy, waits once more.
func (a *Adapter) afterAbort(ctx context.Context, sv *liveServer, t adapters.RepairTarget, dbPath string, f *flight, done []session.Step) []session.Step {
	id, dir := t.UpstreamID, t.Cwd
	w := a.waitIdle(ctx, sv.url, id, dir)
	stillBusy := w.Outcome != session.OutcomeDone
	if stillBusy {
		w.Detail += "; patching its stuck tool parts"
	}
	done = append(done, w)
	// OpenCode marks its own abandoned calls when the abort reaches
	// them: patch only what is still in flight now.
	if g, err := a.readFlightRO(ctx, dbPath, id); err == nil {
		f = g
	}
	// The wait may have been long: the server may have gone since.
	if err := a.checkServer(sv.srv); err != nil {
		return append(done, serverFailed(sv, "check server", err))
	}
	parts, err := a.serverParts(ctx, sv.url, id, dir, f)
	if err != nil {
		return append(done, serverFailed(sv, "read in-flight tool parts", err))
	}
	patched, err := adapters.Apply(ctx, a.patchPlan(sv, dir, parts))
	done = append(done, patched...)
	if err != nil {
		return done
	}
	if stillBusy {
		w := a.waitIdle(ctx, sv.url, id, dir)
		w.Action = "session idle after patching"
		if w.Outcome != session.OutcomeDone {
			w.Outcome = session.OutcomeFailed
			w.Detail += "; stop its owner with sessionctl stop"
		}
		done = append(done, w)
	}
	return a.withOpenMessages(ctx, done, dbPath, id)
}

// serverFailed is a step of a server repair that failed, having written
// nothing.
func serverFailed(sv *liveServer, action string, err error) session.Step {
	return session.StepFailed(action, sv.url, "through"+sv.on()+"; nothing written", err)
}

// rejectPlan rejects the session's pending questions and permissions.
func (a *Adapter) rejectPlan(sv *liveServer, dir string, reqs []pendingRequest) []adapters.PlannedStep {
	var plan []adapters.PlannedStep
	for _, r := range reqs {
		plan = append(plan, adapters.Plan("reject pending "+r.kind, r.id, "through"+sv.on(), func(ctx context.Context) error {
			if r.kind == "question" {
				return a.do(ctx, http.MethodPost, sv.url, "/question/"+url.PathEscape(r.id)+"/reject", dir, nil, nil)
			}
			return a.do(ctx, http.MethodPost, sv.url, "/permission/"+url.PathEscape(r.id)+"/reply", dir, map[string]string{"reply": "reject"}, nil)
		}))
	}
	return plan
}

// abortPlan aborts the session's busy turn.
func (a *Adapter) abortPlan(sv *liveServer, id, dir string) adapters.PlannedStep {
	return adapters.Plan("abort turn", id, "POST /session/"+id+"/abort"+sv.on()+" (status "+sv.status.Type+")", func(ctx context.Context) error {
		return a.do(ctx, http.MethodPost, sv.url, "/session/"+url.PathEscape(id)+"/abort", dir, nil, nil)
	})
}

// patchPlan marks the parts interrupted through the server.
func (a *Adapter) patchPlan(sv *liveServer, dir string, parts []serverPart) []adapters.PlannedStep {
	var plan []adapters.PlannedStep
	for _, p := range parts {
		plan = append(plan, adapters.Plan("mark tool part interrupted", p.ID,
			fmt.Sprintf("tool %s (call %s, message %s) is %s: PATCH to error %q with metadata.interrupted%s", orDash(p.Tool), orDash(p.CallID), p.MessageID, p.Status, abortedToolError, sv.on()),
			func(ctx context.Context) error { return a.patchPart(ctx, sv.url, dir, p) }))
	}
	return plan
}

// withOpenMessages ends a server repair's checklist with the assistant
// messages it leaves open, as the database shows them now.
func (a *Adapter) withOpenMessages(ctx context.Context, done []session.Step, dbPath, id string) []session.Step {
	if g, err := a.readFlightRO(ctx, dbPath, id); err == nil {
		done = append(done, openMessageSteps(g)...)
	}
	return done
}

// openMessageSteps report assistant messages the server rung cannot
// close: OpenCode's API has no endpoint that sets time.completed.
func openMessageSteps(f *flight) []session.Step {
	var out []session.Step
	for _, m := range f.msgs {
		out = append(out, session.StepSkipped("leave assistant message open", m.ID,
			"no OpenCode endpoint sets time.completed; an offline repair sets it once no process holds the database"))
	}
	return out
}

// patchPart sends the part back with the interrupted state, as OpenCode
// itself marks an abandoned call.
func (a *Adapter) patchPart(ctx context.Context, base, dir string, p serverPart) error {
	created := int64(0)
	if !p.Start.IsZero() {
		created = p.Start.UnixMilli()
	}
	st, err := interruptedState(p.obj, created, a.cfg.Now().UnixMilli())
	if err != nil {
		return err
	}
	body := make(map[string]any, len(p.obj))
	for k, v := range p.obj {
		body[k] = v
	}
	body["state"] = st
	path := "/session/" + url.PathEscape(p.SessionID) + "/message/" + url.PathEscape(p.MessageID) + "/part/" + url.PathEscape(p.ID)
	if err := a.do(ctx, http.MethodPatch, base, path, dir, body, nil); err != nil {
		return fmt.Errorf("PATCH %s: %w", path, err)
	}
	return nil
}

// waitIdle polls the server until it no longer reports the session busy,
// at most AbortWait.
func (a *Adapter) waitIdle(ctx context.Context, base, id, dir string) session.Step {
	const action = "wait for idle"
	start := time.Now()
	deadline := start.Add(a.cfg.AbortWait)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := a.sessionStatus(ctx, base, dir)
		if err == nil {
			if v, ok := st[id]; !ok || v.Type == "" || v.Type == "idle" {
				return session.StepDone(action, id, fmt.Sprintf("idle after %s", time.Since(start).Round(time.Millisecond)))
			}
		}
		if time.Now().After(deadline) {
			detail := fmt.Sprintf("still busy after %s", a.cfg.AbortWait)
			if err != nil {
				detail = fmt.Sprintf("status unknown after %s (%v)", a.cfg.AbortWait, err)
			}
			return session.StepSkipped(action, id, detail)
		}
		select {
		case <-ctx.Done():
			return session.StepFailed(action, id, "", ctx.Err())
		case <-tick.C:
		}
	}
}
