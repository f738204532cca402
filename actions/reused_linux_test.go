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

// TestReusedPIDNeverSignalled holds the probe before each signal with one
// target; these hold it where it is easier to lose: beside a live target
// that is signalled, on the SIGKILL of force, and for a group target,
// whose number a new group can take once the recorded one is gone.

// signalsSeen records the signals asked for and sends none.
type signalsSeen struct {
	mu   sync.Mutex
	sent []string
}

func (s *signalsSeen) signal(pid int, sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, strconv.Itoa(pid)+" "+sig.String())
	return nil
}

func (s *signalsSeen) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.sent...)
}

// A reused pid among live targets: the live one is signalled, the reused
// one never, whether the first signal is SIGTERM or (force) SIGKILL.
func TestReusedPIDBesideALiveTarget(t *testing.T) {
	for _, force := range []bool{false, true} {
		t.Run("force="+strconv.FormatBool(force), func(t *testing.T) {
			_, target := start(t, false, "sleep", "30")
			_, other := start(t, false, "sleep", "30")
			reused := other
			reused.StartTicks++ // the process we recorded is gone; its pid is other's now
			log := &signalLog{}
			term := &Terminator{Probe: proc.NewHost(), Signal: log.signal, Poll: 20 * time.Millisecond}
			steps := term.Terminate(context.Background(), []Target{{ID: target, What: "orphan"}, {ID: reused, What: "orphan"}}, 2*time.Second, force)
			sig := "terminated"
			if force {
				sig = "killed"
			}
			if got := log.list(); len(got) != 1 || got[0] != strconv.Itoa(target.PID)+" "+sig {
				t.Fatalf("signals %q, want only %q to pid %d; steps %+v", got, sig, target.PID, steps)
			}
			if steps[0].Outcome != session.OutcomeDone {
				t.Errorf("live target: %+v", steps[0])
			}
			if steps[1].Outcome != session.OutcomeSkipped || !strings.Contains(steps[1].Detail, "reused") {
				t.Errorf("reused pid: %+v", steps[1])
			}
			if r := proc.NewHost().Probe(other); r.Liveness != proc.Alive {
				t.Fatalf("the process that took the pid (%d) was hurt: %v", other.PID, r)
			}
		})
	}
}

// stop of a launched session signals the process group its owner led.
// Once that owner and its group are gone, a new session leader may take
// the pid, and with it the group's number: the group recorded is gone,
// and the new one is never signalled, planned or carried out.
func TestReusedGroupLeaderNeverSignalled(t *testing.T) {
	_, leader := start(t, true, "sleep", "30") // leads a group of its own
	reused := leader
	reused.StartTicks++ // the recorded leader, gone; its pid leads another group now
	seen := &signalsSeen{}
	term := &Terminator{Probe: proc.NewHost(), Signal: seen.signal, Poll: 20 * time.Millisecond}
	tg := []Target{{ID: reused, Group: true, What: "owner and its process group (launched by sessiond)"}}
	if p := term.Plan(tg, time.Second, false); p[0].Outcome != session.OutcomeSkipped {
		t.Fatalf("plan %+v", p[0])
	}
	for _, force := range []bool{false, true} {
		steps := term.Terminate(context.Background(), tg, 300*time.Millisecond, force)
		if got := seen.list(); len(got) != 0 {
			t.Fatalf("force=%v: signals %q to the group a new leader took; step %+v", force, got, steps[0])
		}
		if steps[0].Outcome != session.OutcomeSkipped || !strings.Contains(steps[0].Detail, "no process of the group is left") {
			t.Fatalf("force=%v: step %+v", force, steps[0])
		}
	}
	if r := proc.NewHost().Probe(leader); r.Liveness != proc.Alive {
		t.Fatalf("the new group's leader was hurt: %v", r)
	}
}
