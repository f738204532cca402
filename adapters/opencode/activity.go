package opencode

import (
	"fmt"
	"sort"
	"time"

	"github.com/sessiond/sessiond/session"
)

// actResult is a session's activity and the evidence for it.
type actResult struct {
	activity session.Activity
	evidence string
	// wait is what a waiting session waits for.
	wait *session.WaitingFor
	// server: a server's answer decided it, not the data alone.
	server bool
	// stale: the data shows work in flight, but the live server that owns
	// the session reports it idle (the restart shape of the seed report).
	stale bool
}

// activity decides busy / waiting / idle:
//   - a pending question or permission on a server, or a running question
//     tool part (unless a server that answered lists no question for it),
//     is waiting;
//   - a server's busy or retry is busy;
//   - a parent running a task judges its leaf: the child's activity;
//   - data in flight is busy, unless stale;
//   - else idle.
func (p *pass) activity(s *sessionData, depth int) *actResult {
	if r, ok := p.acts[s.ID]; ok {
		return r
	}
	r := p.decideActivity(s, depth)
	p.acts[s.ID] = r
	return r
}

func (p *pass) decideActivity(s *sessionData, depth int) *actResult {
	var busyServer *server
	var st statusEntry
	for _, sv := range p.servers {
		if w := sv.questions[s.ID]; w != nil {
			return &actResult{server: true, activity: session.ActivityWaiting, evidence: "server " + sv.URL + ": question pending", wait: w}
		}
		if w := sv.permissions[s.ID]; w != nil {
			return &actResult{server: true, activity: session.ActivityWaiting, evidence: "server " + sv.URL + ": permission pending", wait: w}
		}
		if v, ok := sv.status[s.ID]; ok && busyServer == nil {
			busyServer, st = sv, v
		}
	}
	if q := s.runningQuestion(); q != nil {
		switch {
		case busyServer != nil && busyServer.askedDirs[s.Directory]:
			return &actResult{server: true, activity: session.ActivityBusy, evidence: "data: question tool part " + q.ID + " running, but server " + busyServer.URL + " has no pending question for it (stuck)"}
		case busyServer == nil && p.stale(s):
			return &actResult{server: true, activity: session.ActivityIdle, stale: true,
				evidence: "server reports it idle; the data's running question is stale (" + s.describeFlight() + ")"}
		}
		return &actResult{activity: session.ActivityWaiting, evidence: "data: question tool part " + q.ID + " running", wait: &session.WaitingFor{Kind: session.WaitingQuestion, Tool: "question"}}
	}
	if busyServer != nil {
		ev := "server " + busyServer.URL + " status " + st.Type
		if st.Type == "retry" {
			ev += fmt.Sprintf(" (attempt %d", st.Attempt)
			if !st.Next.IsZero() {
				ev += ", next at " + st.Next.UTC().Format(time.RFC3339)
			}
			ev += ")"
		}
		return &actResult{activity: session.ActivityBusy, evidence: ev, server: true}
	}
	if !s.inFlight() {
		if s.LastAssistant == nil {
			return &actResult{activity: session.ActivityIdle, evidence: "data: no assistant message"}
		}
		return &actResult{activity: session.ActivityIdle, evidence: "data: last assistant message completed"}
	}
	if depth < maxDepth {
		for _, cid := range p.workingChildren(s) {
			c := p.sessions[cid]
			cr := p.activity(c, depth+1)
			if cr.activity == session.ActivityWaiting || cr.activity == session.ActivityBusy {
				return &actResult{activity: cr.activity, evidence: "subagent session " + cid + ": " + cr.evidence, wait: cr.wait, server: cr.server}
			}
		}
	}
	if p.stale(s) {
		return &actResult{server: true, activity: session.ActivityIdle, stale: true,
			evidence: "server reports it idle; the data's in-flight work is stale (" + s.describeFlight() + ")"}
	}
	return &actResult{activity: session.ActivityBusy, evidence: "data: " + s.describeFlight()}
}

// workingChildren are the child sessions a running task part of s works
// through: named by the part's metadata, else children with work in flight.
func (p *pass) workingChildren(s *sessionData) []string {
	var out []string
	seen := map[string]bool{}
	task := false
	for _, t := range s.Tools {
		if t.Tool != "task" || t.Status != "running" {
			continue
		}
		task = true
		if c := t.ChildSessionID; c != "" && p.sessions[c] != nil && !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	if task && len(out) == 0 {
		for _, c := range p.children[s.ID] {
			if cs := p.sessions[c]; cs != nil && cs.inFlight() && !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	sort.Strings(out)
	return out
}

// lastActivity is the session's last write, or its working child's when
// the session waits on a subagent: a parent is not idle while its child
// works.
func (p *pass) lastActivity(s *sessionData, depth int) time.Time {
	t := s.LastWrite
	if depth < maxDepth && s.inFlight() {
		for _, c := range p.workingChildren(s) {
			if ct := p.lastActivity(p.sessions[c], depth+1); ct.After(t) {
				t = ct
			}
		}
	}
	return t
}

// stale reports in-flight data that no live process is working on: every
// owner is a server that answered for the session's directory and none
// reports it busy, and the data has been still for StaleAfter.
func (p *pass) stale(s *sessionData) bool {
	owners := p.ownersOf(s, 0)
	if len(owners) == 0 || p.now.Sub(s.LastWrite) < p.a.cfg.StaleAfter {
		return false
	}
	for _, ow := range owners {
		var sv *server
		for _, x := range p.servers {
			if x.Owner == ow.Identity {
				sv = x
			}
		}
		if sv == nil || !sv.answeredFor(s.Directory) {
			return false
		}
		if _, busy := sv.status[s.ID]; busy {
			return false
		}
	}
	return true
}
