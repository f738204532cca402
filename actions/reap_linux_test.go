package actions

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// signalLog records every signal and then really sends it.
type signalLog struct {
	mu   sync.Mutex
	sent []string
}

func (l *signalLog) signal(pid int, sig syscall.Signal) error {
	l.mu.Lock()
	l.sent = append(l.sent, strconv.Itoa(pid)+" "+sig.String())
	l.mu.Unlock()
	return syscall.Kill(pid, sig)
}

func (l *signalLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.sent...)
}

func targetsOf(ids []proc.Identity) []Target {
	var ts []Target
	for _, id := range ids {
		ts = append(ts, Target{ID: id, What: "orphaned tool process"})
	}
	return ts
}

// An agent killed with SIGKILL leaves its tool processes in its process
// group (MCP servers do exactly that). When every member of the group is
// attributed to the dead session, reap signals the group once: that also
// reaches a child one of them forks between the look and the signal.
func TestReapSignalsWhollyAttributedGroupOnce(t *testing.T) {
	leader, orphans, done := groupScript(t, `sleep 30 >/dev/null & echo $!; sleep 30 >/dev/null & echo $!`)
	<-done // the leader is gone; its two sleeps keep the group
	pgid := leader.PID
	term := &Terminator{Probe: proc.NewHost(), Poll: 20 * time.Millisecond}
	group := "to process group " + strconv.Itoa(pgid)
	// One step per target still (the checklist names each process); each
	// says the signal goes to the group.
	for i, st := range term.Plan(targetsOf(orphans), time.Second, false) {
		if st.Target != "pid "+strconv.Itoa(orphans[i].PID) || st.Outcome != session.OutcomePlanned || !strings.Contains(st.Action, group) {
			t.Errorf("plan step %d: %+v, want a planned SIGTERM %s for pid %d", i, st, group, orphans[i].PID)
		}
	}
	log := &signalLog{}
	term.Signal = log.signal
	steps := term.Terminate(context.Background(), targetsOf(orphans), 2*time.Second, false)
	for i, id := range orphans {
		waitDead(t, id, "orphan "+strconv.Itoa(i))
	}
	want := strconv.Itoa(-pgid) + " terminated"
	if got := log.list(); len(got) != 1 || got[0] != want {
		t.Fatalf("signals sent %q, want only %q (one SIGTERM to the group); steps %+v", got, want, steps)
	}
	if len(steps) != len(orphans) {
		t.Fatalf("steps %+v, want one per target", steps)
	}
	for i, st := range steps {
		if st.Target != "pid "+strconv.Itoa(orphans[i].PID) || st.Outcome != session.OutcomeDone || !strings.Contains(st.Action, group) || !strings.HasSuffix(st.Detail, "exited") {
			t.Errorf("step %d: %+v, want SIGTERM %s done and pid %d exited", i, st, group, orphans[i].PID)
		}
	}
}

// A process group that holds a process not attributed to the session is
// never signalled as a group: each attributed pid is, and the bystander
// lives on.
func TestReapSignalsEachPidWhenGroupHasBystander(t *testing.T) {
	_, procs, done := groupScript(t, `sleep 30 >/dev/null & echo $!; sleep 30 >/dev/null & echo $!; sleep 30 >/dev/null & echo $!`)
	<-done
	orphans, bystander := procs[:2], procs[2]
	log := &signalLog{}
	term := &Terminator{Probe: proc.NewHost(), Signal: log.signal, Poll: 20 * time.Millisecond}
	for i, st := range term.Plan(targetsOf(orphans), time.Second, false) {
		if st.Outcome != session.OutcomePlanned || strings.Contains(st.Action, "group") {
			t.Errorf("plan step %d: %+v, want a planned signal to pid %d alone", i, st, orphans[i].PID)
		}
	}
	steps := term.Terminate(context.Background(), targetsOf(orphans), 2*time.Second, false)
	for i, id := range orphans {
		waitDead(t, id, "orphan "+strconv.Itoa(i))
	}
	got := log.list()
	if len(got) != 2 || got[0] != strconv.Itoa(orphans[0].PID)+" terminated" || got[1] != strconv.Itoa(orphans[1].PID)+" terminated" {
		t.Fatalf("signals sent %q, want one SIGTERM to each of pids %d and %d; steps %+v", got, orphans[0].PID, orphans[1].PID, steps)
	}
	if r := proc.NewHost().Probe(bystander); r.Liveness != proc.Alive {
		t.Fatalf("the unattributed member of the group (pid %d) was hurt: %v", bystander.PID, r)
	}
}
