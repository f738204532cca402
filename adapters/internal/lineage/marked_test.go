package lineage

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
)

// mine is p as a process of this user, with argv.
func mine(p *proc.Process, argv ...string) *proc.Process {
	p.UID = os.Getuid()
	p.Argv = argv
	p.Cwd = "/w"
	return p
}

func observed(id string, owners ...*proc.Process) adapters.Observed {
	o := adapters.Observed{UpstreamID: id, LastActivity: time.Unix(1000, 0)}
	for _, p := range owners {
		o.Owners = append(o.Owners, adapters.Owner{Identity: p.Identity})
	}
	return o
}

func keys(is []adapters.Issue) (out []string) {
	for _, i := range is {
		out = append(out, i.Key)
	}
	return out
}

func TestAddToolProcs(t *testing.T) {
	started := map[int]time.Time{}
	mk := Marked{Var: "AGENT_SESSION", Agent: "agent", Session: "Agent",
		Own: func(p *proc.Process) bool { return len(p.Argv) > 0 && p.Argv[0] == "agent" },
		StartTime: func(id proc.Identity) (time.Time, error) {
			if t, ok := started[id.PID]; ok {
				return t, nil
			}
			return time.Time{}, errors.New("gone")
		},
	}
	// Owner 10 of session s1 (its own session 10) runs tool 20 (setsid,
	// marked s1), which forked 21. 30, a pane of a tmux server, carries s1
	// too but is not below 10. 11 is a second agent process carrying s1,
	// 12 a process of another user.
	owner := mine(row(10, 1, 1, 10, 10), "agent")
	tool := mine(row(20, 2, 10, 20, 20, "AGENT_SESSION=s1"), "/bin/bash", "-c", "make")
	child := mine(row(21, 3, 20, 20, 20, "AGENT_SESSION=s1"), "make")
	pane := mine(row(30, 4, 29, 30, 30, "AGENT_SESSION=s1"), "zsh")
	self := mine(row(11, 5, 10, 10, 10, "AGENT_SESSION=s1"), "agent")
	other := row(12, 6, 10, 10, 10, "AGENT_SESSION=s1")
	other.UID = os.Getuid() + 1
	m := NewTagged(bounds, func(p *proc.Process) string { return p.Env["AGENT_SESSION"] })

	// Alive: no problems; a tool of the owner started after the last
	// activity is activity; the pane, not the owner's, is not.
	started[20] = time.Unix(2000, 0)
	started[21] = time.Unix(500, 0) // before the last activity
	started[30] = time.Unix(3000, 0)
	obs := []adapters.Observed{observed("s1", owner), observed("s2")}
	m.AddToolProcs(obs, snap(owner, tool, child, pane, self, other), mk)
	if len(obs[0].Problems) != 0 || !obs[0].LastActivity.Equal(time.Unix(2000, 0)) {
		t.Fatalf("live owner: problems %v, last activity %v; want none, the tool's start", obs[0].Problems, obs[0].LastActivity)
	}
	// Without StartTime, tools change nothing.
	noStart := mk
	noStart.StartTime = nil
	obs = []adapters.Observed{observed("s1", owner)}
	m.AddToolProcs(obs, snap(owner, tool, child, pane, self, other), noStart)
	if len(obs[0].Problems) != 0 || !obs[0].LastActivity.Equal(time.Unix(1000, 0)) {
		t.Fatalf("live owner, no StartTime: %v, %v", obs[0].Problems, obs[0].LastActivity)
	}

	// The owner killed: bash died with it, 21 lives on, re-parented, and
	// 22, forked by it after the last look, is in the tool's session. The
	// agent's own 11 and the other user's 12 are in the dead owner's
	// session, but no candidates.
	late := mine(row(22, 9, 1, 20, 22, "AGENT_SESSION=s1"), "sleep")
	dead := snap(reparented(child), late, pane, self, other)
	obs = []adapters.Observed{observed("s1", owner), observed("s2")}
	judged := mk
	judged.Unjudged = func(o *adapters.Observed) bool { return o.UpstreamID == "s2" }
	m.AddToolProcs(obs, dead, judged)
	ps := obs[0].Problems
	if !slices.Equal(keys(ps), []string{"21", "22", "30"}) || len(obs[1].Problems) != 0 {
		t.Fatalf("dead owner: problems %v, s2 %v; want 21, 22 and 30 on s1", keys(ps), obs[1].Problems)
	}
	if ps[1].Process == nil || *ps[1].Process != late.Identity {
		t.Errorf("a process in the dead owner's tool session is not its orphan: %+v", ps[1])
	}
	if ps[0].Process == nil || *ps[0].Process != child.Identity || ps[0].Kind != "orphan_processes" ||
		!strings.HasPrefix(ps[0].Detail, "pid 21 of this Agent session still runs with no live agent owning it: make (cwd /w); ") {
		t.Errorf("the orphan: %+v", ps[0])
	}
	if ps[2].Process != nil || !strings.Contains(ps[2].Detail, "pid 30 carries this session's AGENT_SESSION, but nothing ties it to the session's agent") {
		t.Errorf("the suspect: %+v", ps[2])
	}
	// A session not to be judged: nothing named.
	obs = []adapters.Observed{observed("s1", owner)}
	judged.Unjudged = func(*adapters.Observed) bool { return true }
	m.AddToolProcs(obs, dead, judged)
	if len(obs[0].Problems) != 0 {
		t.Fatalf("an unjudged session: %v", obs[0].Problems)
	}

	// A process proven another live owner's that carries the mark of a
	// session whose owner is dead: a suspect, its owner named.
	owner2 := mine(row(40, 7, 1, 40, 40), "agent")
	tool2 := mine(row(41, 8, 40, 41, 41, "AGENT_SESSION=s1"), "sleep")
	m2 := NewTagged(bounds, func(p *proc.Process) string { return p.Env["AGENT_SESSION"] })
	obs = []adapters.Observed{observed("s1", owner), observed("s3", owner2)}
	m2.AddToolProcs(obs, snap(owner2, tool2), mk)
	if ps := obs[0].Problems; len(ps) != 1 || ps[0].Process != nil || !strings.Contains(ps[0].Detail, "but its agent pid 40 still runs and may track it") {
		t.Fatalf("a live owner's process marked with a dead one's session: %+v", ps)
	}

	// No snapshot: nothing at all.
	obs = []adapters.Observed{observed("s1", owner)}
	m.AddToolProcs(obs, nil, mk)
	if len(obs[0].Problems) != 0 {
		t.Fatal("problems without a snapshot")
	}
}
