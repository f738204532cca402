package claude

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"

	"github.com/sessiond/sessiond/internal/testkit/testenv"
)

// hostWithMachineID is a real process host whose machine id is read from
// a fixture file holding id, as Claude would read it on a machine with
// that /etc/machine-id.
func hostWithMachineID(t *testing.T, id string) *proc.Host {
	t.Helper()
	f := filepath.Join(t.TempDir(), "machine-id")
	if err := os.WriteFile(f, []byte(id+"\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	return &proc.Host{MachineIDFile: f}
}

func adapterOn(t *testing.T, h ProcHost, root string) *Adapter {
	return New(Config{Roots: []string{root}, DefaultRoot: root, NoLearnedRoots: true, Host: h, Logger: zaptest.NewLogger(t)})
}

func ownNamespace(t *testing.T) string {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Skipf("no PID namespace link: %v", err)
	}
	return ns
}

// The seed bug: an interactive claude (or claude -p without --session-id)
// on a machine with /etc/machine-id, which is every systemd machine, was
// listed interrupted while it ran, because pidDomain's machine id was read
// as a boot id. The machine id differs from the boot id, as on every real
// machine: the entry must name a live owner, validated, with its registry
// activity.
func TestPIDDomainMachineIDIsNotABootID(t *testing.T) {
	boot, err := proc.NewHost().BootID()
	if err != nil {
		t.Fatal(err)
	}
	machine := "3d1219c7c4c5404aaa1f6d2a48adfda4"
	if strings.ReplaceAll(boot, "-", "") == machine {
		machine = "0ca0e748c4c5404aaa1f6d2a48adfda4"
	}
	cases := map[string]*proc.Host{"fixture machine id": hostWithMachineID(t, machine)}
	if b, err := os.ReadFile("/etc/machine-id"); err == nil && strings.TrimSpace(string(b)) != "" {
		cases["this machine's /etc/machine-id"] = proc.NewHost()
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			if strings.ReplaceAll(boot, "-", "") == h.MachineID() {
				t.Fatalf("machine id %s equals the boot id: the test proves nothing", h.MachineID())
			}
			r, cwd := newRoot(t)
			id := claudetest.NewSessionID()
			owner := start(t, cwd, nil, "sleep", "120")
			e := claudetest.LiveEntry(t, owner.pid, id, cwd, "busy")
			e.PIDDomain = "linux:" + h.MachineID() + ":" + ownNamespace(t)
			if name != "fixture machine id" && e.PIDDomain != claudetest.HostDomain() {
				t.Fatalf("claudetest writes %q, the host's domain is %q", claudetest.HostDomain(), e.PIDDomain)
			}
			r.WriteRegistry(t, e)
			a := adapterOn(t, h, r.Dir)
			for _, snap := range []*proc.Snapshot{snapshot(t), nil} {
				o := mustFind(t, discover(t, a, snap), id)
				if len(o.Owners) != 1 || o.Owners[0].NoProbe != nil || o.Owners[0].Identity.PID != owner.pid {
					t.Fatalf("owners %+v, want pid %d to probe", o.Owners, owner.pid)
				}
				if r := h.Probe(o.Owners[0].Identity); r.Liveness != proc.Alive {
					t.Fatalf("the owner of a live entry probes %v: %s", r.Liveness, r.Reason)
				}
				if o.Activity != session.ActivityBusy || o.ActivityEvidence != evidenceRegistryState {
					t.Fatalf("activity %q (%s), want busy from the registry", o.Activity, o.ActivityEvidence)
				}
				if len(o.Problems) != 0 {
					t.Fatalf("problems %+v", o.Problems)
				}
			}
		})
	}
}

// An entry of another machine (a shared or synced home) is never probed
// here, whatever lives at its pid on this host, and never made dead: its
// owner carries an Unknown answer and the session a foreign_host problem.
func TestPIDDomainOtherMachineNeverProbed(t *testing.T) {
	r, cwd := newRoot(t)
	for _, tc := range []struct {
		name, domain string
		pid          func() int
	}{
		{"live pid here", claudetest.ForeignDomain(), func() int { return start(t, cwd, nil, "sleep", "120").pid }},
		{"dead pid here", claudetest.ForeignDomain(), func() int { return 1 << 22 }},
		{"a Mac's entry", "linux", func() int { return 1<<22 - 1 }},
		{"a Windows entry", "linux:desktop-4f2", func() int { return 1<<22 - 2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := claudetest.NewSessionID()
			pid := tc.pid()
			r.WriteRegistry(t, claudetest.NewEntry(pid, "12345", tc.domain, id, cwd, "busy", time.Now()))
			a := adapterOn(t, proc.NewHost(), r.Dir)
			o := mustFind(t, discover(t, a, snapshot(t)), id)
			if len(o.Owners) != 1 || o.Owners[0].NoProbe == nil || o.Owners[0].NoProbe.Liveness != proc.Unknown {
				t.Fatalf("owners %+v, want one that is not probed (unknown)", o.Owners)
			}
			is := issue(o.Problems, session.ProblemForeignHost, "")
			if is == nil || !strings.Contains(is.Detail, "another machine") {
				t.Fatalf("problems %+v, want foreign_host", o.Problems)
			}
			if issue(o.InFlight, session.ProblemStaleBusyMarker, "") != nil {
				t.Fatalf("another machine's busy entry is not a stale marker here: %+v", o.InFlight)
			}
		})
	}
}

// An entry of this machine written before this boot (startedAt earlier
// than btime) is dead, with that reason, even when a process of this boot
// has the same pid and the same start ticks.
func TestPIDDomainEarlierBootIsDead(t *testing.T) {
	h := proc.NewHost()
	bt, err := h.BootTime()
	if err != nil {
		t.Fatal(err)
	}
	r, cwd := newRoot(t)
	id := claudetest.NewSessionID()
	owner := start(t, cwd, nil, "sleep", "120")
	e := claudetest.LiveEntry(t, owner.pid, id, cwd, "busy") // matching procStart
	e.StartedAt = bt.Add(-time.Hour).UnixMilli()
	r.WriteRegistry(t, e)
	a := adapterOn(t, h, r.Dir)
	o := mustFind(t, discover(t, a, snapshot(t)), id)
	if len(o.Owners) != 1 || o.Owners[0].NoProbe == nil || o.Owners[0].NoProbe.Liveness != proc.Dead ||
		!strings.Contains(o.Owners[0].NoProbe.Reason, "before this boot") {
		t.Fatalf("owners %+v, want dead: written before this boot", o.Owners)
	}
	if issue(o.InFlight, session.ProblemStaleBusyMarker, "") == nil {
		t.Fatalf("a busy entry of an earlier boot is a stale marker: %+v", o.InFlight)
	}
}

// startInNewNamespace starts sleep as pid 1 of a new PID namespace
// (unshare needs CAP_SYS_ADMIN: root, as in CI) and returns its host pid
// and the namespace's link text.
func startInNewNamespace(t *testing.T) (int, string) {
	t.Helper()
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare not installed")
	}
	cmd := exec.Command("unshare", "-p", "-f", "sleep", "120")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Skipf("unshare: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	var pid int
	var ns string
	found := testenv.Poll(5*time.Second, func() bool {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/task/" + strconv.Itoa(cmd.Process.Pid) + "/children")
		for _, f := range strings.Fields(string(b)) {
			if link, err := os.Readlink("/proc/" + f + "/ns/pid"); err == nil && link != ownNamespace(t) {
				pid, _ = strconv.Atoi(f)
				ns = link
			}
		}
		return pid != 0
	})
	if !found {
		t.Skip("unshare -p started no process in a new namespace (not permitted here?)")
	}
	return pid, ns
}

// A claude in a container (same machine, another PID namespace) names
// itself by its namespace's pid: the adapter finds the host pid through
// NSpid and probes that; a pid the visible namespace does not hold is
// dead; a namespace nothing of which is visible is gone where this host
// sees every process of the machine (the initial PID namespace, as root),
// else foreign_pid_namespace (pidns_linux_test.go has both on fixtures).
func TestPIDDomainOtherNamespace(t *testing.T) {
	hostPID, ns := startInNewNamespace(t)
	h := proc.NewHost()
	r, cwd := newRoot(t)
	ids, err := h.Identify(hostPID)
	if err != nil {
		t.Fatal(err)
	}
	domain := "linux:" + h.MachineID() + ":" + ns

	inside := claudetest.NewSessionID()
	r.WriteRegistry(t, claudetest.NewEntry(1, strconv.FormatUint(ids.StartTicks, 10), domain, inside, cwd, "busy", time.Now()))
	gone := claudetest.NewSessionID()
	r.WriteRegistry(t, claudetest.NewEntry(7, "1", domain, gone, cwd, "busy", time.Now()))
	hidden := claudetest.NewSessionID()
	r.WriteRegistry(t, claudetest.NewEntry(9, "1", "linux:"+h.MachineID()+":pid:[1]", hidden, cwd, "busy", time.Now()))

	a := adapterOn(t, h, r.Dir)
	obs := discover(t, a, snapshot(t))
	o := mustFind(t, obs, inside)
	if len(o.Owners) != 1 || o.Owners[0].NoProbe != nil || o.Owners[0].Identity.PID != hostPID {
		t.Fatalf("owners %+v, want host pid %d", o.Owners, hostPID)
	}
	if r := h.Probe(o.Owners[0].Identity); r.Liveness != proc.Alive || o.Activity != session.ActivityBusy {
		t.Fatalf("probe %v (%s), activity %s", r.Liveness, r.Reason, o.Activity)
	}
	o = mustFind(t, obs, gone)
	if len(o.Owners) != 1 || o.Owners[0].NoProbe == nil || o.Owners[0].NoProbe.Liveness != proc.Dead {
		t.Fatalf("owners %+v, want dead: pid 7 is not in the namespace", o.Owners)
	}
	o = mustFind(t, obs, hidden)
	if here, err := h.FindInNamespace("pid:[1]", 9); err == nil && here.Whole {
		if len(o.Owners) != 1 || o.Owners[0].NoProbe == nil || o.Owners[0].NoProbe.Liveness != proc.Dead || len(o.Problems) != 0 {
			t.Fatalf("owners %+v problems %+v, want dead: this host sees every process, none is in that namespace", o.Owners, o.Problems)
		}
	} else if len(o.Owners) != 1 || o.Owners[0].NoProbe == nil || o.Owners[0].NoProbe.Liveness != proc.Unknown ||
		issue(o.Problems, session.ProblemForeignPIDNamespace, "") == nil {
		t.Fatalf("owners %+v problems %+v, want unknown with foreign_pid_namespace (%s)", o.Owners, o.Problems, here.Why)
	}
}

// Safety defect 4.1: repair built its own process view without a
// snapshot, so an entry without procStart read dead, and repair removed
// the registry entry (and .key) of a live session. Repair now acts only on
// a death the identity probe confirms, and never on another machine's.
func TestRepairKeepsWhatItCannotConfirmDead(t *testing.T) {
	r, cwd := newRoot(t)
	id := claudetest.NewSessionID()
	live := start(t, cwd, nil, "sleep", "120")
	noStart := claudetest.NewEntry(live.pid, "", claudetest.HostDomain(), id, cwd, "busy", time.Now())
	keep := []string{r.WriteRegistry(t, noStart), r.WriteKey(t, live.pid)}
	foreign := claudetest.NewEntry(1<<22, "5", claudetest.ForeignDomain(), id, cwd, "busy", time.Now())
	keep = append(keep, r.WriteRegistry(t, foreign))

	deadPID := start(t, cwd, nil, "true")
	<-deadPID.done
	dead := claudetest.NewEntry(deadPID.pid, "", claudetest.HostDomain(), id, cwd, "busy", time.Now())
	remove := []string{r.WriteRegistry(t, dead), r.WriteKey(t, deadPID.pid)}

	a := adapterOn(t, proc.NewHost(), r.Dir)
	target := adapters.RepairTarget{UpstreamID: id, Root: r.Dir}
	steps, err := a.ApplyRepair(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range keep {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s of a session that is not confirmed dead was removed: %v\nsteps %+v", p, err, steps)
		}
	}
	for _, p := range remove {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s of a dead pid was not removed (%v)\nsteps %+v", p, err, steps)
		}
	}
	for _, s := range steps {
		if s.Action == "keep registry entry" && s.Outcome != session.OutcomeSkipped {
			t.Errorf("step %+v", s)
		}
	}
}
