package claude

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// Through Discover on a fixture proc root: a claude in
// a container is named by its namespace's pid; the adapter finds its host
// pid while the namespace is in sight, and must not lose it when the
// namespace goes (a container's pid 1 takes its namespace with it).

const (
	fxBoot      = "7a1c2e3f-0b4d-4e5f-8a9b-0c1d2e3f4a5b"
	fxMachine   = "3d1219c7c4c5404aaa1f6d2a48adfda4"
	fxContainer = "pid:[4026532001]" // a daemon that runs in a container
	fxClaudeNS  = "pid:[4026532178]" // the namespace the entry names
	// fxEvidence is how the adapter names the owner of pid 1 of that
	// namespace, found at its host pid or not.
	fxEvidence = "registry, pid 1 of PID namespace " + fxClaudeNS
)

// fxProc is a fixture proc root with a fake signal 0 that finds exactly
// the fixture's processes.
type fxProc struct {
	t    *testing.T
	root string
	host *proc.Host
}

func newFxProc(t *testing.T, own, mountOpts string) *fxProc {
	t.Helper()
	dir := t.TempDir()
	f := &fxProc{t: t, root: filepath.Join(dir, "proc")}
	f.write("sys/kernel/random/boot_id", fxBoot+"\n")
	f.write("stat", fmt.Sprintf("cpu  1 2 3 4\nbtime %d\n", time.Now().Add(-time.Hour).Unix()))
	f.link("self/ns/pid", own)
	f.write("self/mountinfo", "25 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"+
		"22 25 0:21 / "+f.root+" rw,nosuid,nodev,noexec,relatime shared:13 - proc proc "+mountOpts+"\n")
	f.process(1, "pid:[4026531836]", "1", 4, "/sbin/init")
	mid := filepath.Join(dir, "machine-id")
	if err := os.WriteFile(mid, []byte(fxMachine+"\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	f.host = &proc.Host{Root: f.root, MachineIDFile: mid, Signal0: func(pid int) error {
		if _, err := os.Stat(filepath.Join(f.root, strconv.Itoa(pid))); err != nil {
			return syscall.ESRCH
		}
		return nil
	}}
	return f
}

func (f *fxProc) write(rel, data string) {
	f.t.Helper()
	p := filepath.Join(f.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fxProc) link(rel, target string) {
	f.t.Helper()
	p := filepath.Join(f.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		f.t.Fatal(err)
	}
}

// process writes a process in namespace ns (""; a namespace link that
// cannot be read, as another user's) with its NSpid line.
func (f *fxProc) process(pid int, ns, nspids string, ticks uint64, argv ...string) {
	f.t.Helper()
	d := strconv.Itoa(pid)
	f.write(d+"/stat", fmt.Sprintf("%d (%s) S 1 %d %d 0 -1 4194560 1 0 0 0 3 1 0 0 20 0 1 0 %d 8470528 1015 18446744073709551615 1 1 1 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n",
		pid, filepath.Base(argv[0]), pid, pid, ticks))
	f.write(d+"/status", "Name:\t"+filepath.Base(argv[0])+"\nNSpid:\t"+nspids+"\n")
	f.write(d+"/cmdline", strings.Join(argv, "\x00")+"\x00")
	if ns == "" {
		f.write(d+"/ns/pid", "") // readlink: EINVAL
		return
	}
	f.link(d+"/ns/pid", ns)
}

func (f *fxProc) kill(pid int) {
	f.t.Helper()
	if err := os.RemoveAll(filepath.Join(f.root, strconv.Itoa(pid))); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fxProc) snapshot() *proc.Snapshot {
	f.t.Helper()
	s, err := f.host.Snapshot()
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// nsEntry is the registry entry the claude that is pid nspid of the
// fixture's claude namespace writes, procStart its start ticks.
func nsEntry(nspid int, ticks uint64, id, cwd, status string) claudetest.Entry {
	return claudetest.NewEntry(nspid, strconv.FormatUint(ticks, 10), "linux:"+fxMachine+":"+fxClaudeNS, id, cwd, status, time.Now().Add(-time.Minute))
}

// ownerOf is the session's one owner, or fails.
func ownerOf(t *testing.T, o *adapters.Observed) adapters.Owner {
	t.Helper()
	if len(o.Owners) != 1 {
		t.Fatalf("owners %+v, want one", o.Owners)
	}
	return o.Owners[0]
}

// (b) A daemon in a container (not the initial PID namespace) finds a
// nested namespace's claude at its host pid. Once that claude dies and its
// namespace with it, the daemon cannot see the namespace at all; the host
// identity it found stays the owner, probes dead, and the session's busy
// entry is a stale marker: the tracker makes it interrupted, not unknown.
// The identity is kept across rewrites of the file by the same process,
// dropped when the file names another process, and wins over a namespace
// still in sight that cannot prove the pid gone.
func TestPIDNamespaceMappedOwnerDies(t *testing.T) {
	f := newFxProc(t, fxContainer, "rw")
	f.process(500, fxClaudeNS, "500\t1", 777, "claude", "-p", "run the long job")
	r, cwd := newRoot(t)
	id := claudetest.NewSessionID()
	first := nsEntry(1, 777, id, cwd, "busy")
	path := r.WriteRegistry(t, first)
	a := adapterOn(t, f.host, r.Dir)
	host := proc.Identity{BootID: fxBoot, PID: 500, StartTicks: 777}

	o := mustFind(t, discover(t, a, f.snapshot()), id)
	live := ownerOf(t, o)
	if live.Identity != host || live.NoProbe != nil {
		t.Fatalf("live: owner %+v, want host identity %v, probed", live, host)
	}
	if r := f.host.Probe(host); r.Liveness != proc.Alive || o.Activity != session.ActivityBusy || len(o.Problems) != 0 {
		t.Fatalf("live: probe %v (%s), activity %s, problems %+v", r.Liveness, r.Reason, o.Activity, o.Problems)
	}

	f.kill(500) // pid 1 of its namespace: nothing of the namespace is left
	// The same process's file read again (Claude rewrites it on every
	// status change; here a re-read of a racily clean file).
	e := first
	e.UpdatedAt = time.Now().UnixMilli()
	r.WriteRegistry(t, e)
	for _, snap := range []*proc.Snapshot{f.snapshot(), nil} {
		o = mustFind(t, discover(t, a, snap), id)
		ow := ownerOf(t, o)
		if ow.Identity != host || ow.NoProbe != nil {
			t.Fatalf("dead (snapshot %v): owner %+v NoProbe %+v, problems %+v; want the host identity %v to probe",
				snap != nil, ow, ow.NoProbe, o.Problems, host)
		}
		// Named the same way, found or not, and never Unplaced: the
		// tracker records this evidence with the host identity.
		if ow.Evidence != fxEvidence || live.Evidence != fxEvidence || ow.Unplaced || live.Unplaced {
			t.Fatalf("evidence %q (live %q), unplaced %v (live %v); want %q, placed", ow.Evidence, live.Evidence, ow.Unplaced, live.Unplaced, fxEvidence)
		}
		if r := f.host.Probe(ow.Identity); r.Liveness != proc.Dead {
			t.Fatalf("dead: the host identity probes %v (%s)", r.Liveness, r.Reason)
		}
		if issue(o.Problems, session.ProblemForeignPIDNamespace, "") != nil {
			t.Fatalf("dead: problems %+v, want no foreign_pid_namespace: its host pid was known", o.Problems)
		}
		if issue(o.InFlight, session.ProblemStaleBusyMarker, "") == nil {
			t.Fatalf("dead: in flight %+v, want the busy entry as a stale marker", o.InFlight)
		}
	}

	t.Run("the namespace still in sight", func(t *testing.T) {
		// Another process of the namespace lives on, and one whose
		// namespace cannot be read may be pid 1 of it: the namespace
		// alone cannot prove pid 1 gone. The host identity can.
		f := newFxProc(t, fxContainer, "rw")
		f.process(500, fxClaudeNS, "500\t1", 777, "claude", "-p", "x")
		f.process(501, fxClaudeNS, "501\t2", 778, "python3", "-c", "x")
		r, cwd := newRoot(t)
		id := claudetest.NewSessionID()
		r.WriteRegistry(t, nsEntry(1, 777, id, cwd, "busy"))
		a := adapterOn(t, f.host, r.Dir)
		mustFind(t, discover(t, a, f.snapshot()), id)
		f.kill(500)
		f.process(601, "", "601\t1", 900, "other")
		ow := ownerOf(t, mustFind(t, discover(t, a, f.snapshot()), id))
		if ow.Identity != host || ow.NoProbe != nil || f.host.Probe(ow.Identity).Liveness != proc.Dead {
			t.Fatalf("owner %+v NoProbe %+v, want the host identity %v, probing dead", ow, ow.NoProbe, host)
		}
		// Never mapped, the same sight is not proof: unknown.
		b := adapterOn(t, f.host, r.Dir)
		o := mustFind(t, discover(t, b, f.snapshot()), id)
		// The tracker can still tell it is the recorded owner: the
		// same evidence and start ticks, marked Unplaced.
		if ow := ownerOf(t, o); ow.NoProbe == nil || ow.NoProbe.Liveness != proc.Unknown || !ow.Unplaced || ow.Evidence != fxEvidence ||
			ow.Identity.StartTicks != host.StartTicks ||
			issue(o.Problems, session.ProblemForeignPIDNamespace, "") == nil || !strings.Contains(ow.NoProbe.Reason, "pid 601") {
			t.Fatalf("never mapped: owner %+v NoProbe %+v problems %+v, want unknown naming pid 601", ow, ow.NoProbe, o.Problems)
		}
	})

	t.Run("the file names another process", func(t *testing.T) {
		// The container started again, and its new claude is pid 1 of
		// a namespace with the same inode (inodes are reused): the
		// identity found for the old process is not the new one's.
		f.process(510, fxClaudeNS, "510\t1", 990, "claude", "-p", "again")
		r.WriteRegistry(t, nsEntry(1, 990, id, cwd, "idle"))
		ow := ownerOf(t, mustFind(t, discover(t, a, f.snapshot()), id))
		want := proc.Identity{BootID: fxBoot, PID: 510, StartTicks: 990}
		if ow.Identity != want || ow.NoProbe != nil {
			t.Fatalf("owner %+v, want the new process %v", ow, want)
		}
		os.Remove(path)
	})
}

// (a) and (c) for an entry never found at a host pid (as after a daemon
// restart, or a claude that died before the first pass): the namespace
// with nothing left in sight is gone only for a daemon that sees every
// process of the machine. Dead, with its busy entry a stale marker; else
// unknown with foreign_pid_namespace, saying why.
func TestPIDNamespaceGoneDiscover(t *testing.T) {
	for _, tc := range []struct {
		name, own, opts string
		other           []string // a process with an unreadable namespace link: its NSpid line
		dead            bool
		why             string
	}{
		{name: "initial namespace", own: proc.InitialPIDNamespace, opts: "rw", dead: true},
		{name: "initial namespace, an unreadable process is pid 3 of its own", own: proc.InitialPIDNamespace, opts: "rw",
			other: []string{"600\t3"}, dead: true},
		{name: "initial namespace, an unreadable process is pid 1 of its own", own: proc.InitialPIDNamespace, opts: "rw",
			other: []string{"600\t1"}, why: "pid 600"},
		{name: "initial namespace, hidepid", own: proc.InitialPIDNamespace, opts: "rw,hidepid=invisible", why: "hidepid=invisible"},
		{name: "daemon in a container", own: fxContainer, opts: "rw", why: "not the initial one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFxProc(t, tc.own, tc.opts)
			for i, ns := range tc.other {
				f.process(600+i, "", ns, 50, "other")
			}
			r, cwd := newRoot(t)
			id := claudetest.NewSessionID()
			r.WriteRegistry(t, nsEntry(1, 777, id, cwd, "busy"))
			a := adapterOn(t, f.host, r.Dir)
			for _, snap := range []*proc.Snapshot{f.snapshot(), nil} {
				o := mustFind(t, discover(t, a, snap), id)
				ow := ownerOf(t, o)
				foreign := issue(o.Problems, session.ProblemForeignPIDNamespace, "1")
				if tc.dead {
					if ow.NoProbe == nil || ow.NoProbe.Liveness != proc.Dead || !strings.Contains(ow.NoProbe.Reason, "is gone") || foreign != nil {
						t.Fatalf("owner %+v NoProbe %+v problems %+v, want dead: the namespace is gone", ow, ow.NoProbe, o.Problems)
					}
					if issue(o.InFlight, session.ProblemStaleBusyMarker, "") == nil {
						t.Fatalf("in flight %+v, want the busy entry as a stale marker", o.InFlight)
					}
					continue
				}
				if ow.NoProbe == nil || ow.NoProbe.Liveness != proc.Unknown || foreign == nil || !strings.Contains(foreign.Detail, tc.why) ||
					!ow.Unplaced || ow.Evidence != fxEvidence {
					t.Fatalf("owner %+v NoProbe %+v problems %+v, want unknown with foreign_pid_namespace saying %q", ow, ow.NoProbe, o.Problems, tc.why)
				}
			}
		})
	}
}
