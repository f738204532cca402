package proc

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// nsRoot is a fixture proc root for FindInNamespace: this host's own
// PID namespace, the proc mount's options, and processes with their
// namespace links and NSpid lines.
type nsRoot struct {
	t    *testing.T
	root string
}

const (
	// containerNS is a namespace other than the initial one: a daemon
	// that runs in it is itself in a container.
	containerNS = "pid:[4026532001]"
	// claudeNS is the namespace a registry entry names.
	claudeNS = "pid:[4026532178]"
)

// newNSRoot writes a proc root whose self is in namespace own and whose
// mount at the root has the super options opts ("rw", "rw,hidepid=2"); an
// empty opts writes no mountinfo line for the root.
func newNSRoot(t *testing.T, own, opts string) *nsRoot {
	t.Helper()
	r := &nsRoot{t: t, root: t.TempDir()}
	r.write("sys/kernel/random/boot_id", fixtureBoot+"\n")
	if own != "" {
		r.link("self/ns/pid", own)
	}
	info := "25 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
	if opts != "" {
		info += "22 25 0:21 / " + r.root + " rw,nosuid,nodev,noexec,relatime shared:13 - proc proc " + opts + "\n"
	}
	r.write("self/mountinfo", info)
	r.proc(1, "pid:[4026531836]", "1", 4) // init, in the initial namespace
	return r
}

func (r *nsRoot) write(rel, data string) {
	r.t.Helper()
	p := filepath.Join(r.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *nsRoot) link(rel, target string) {
	r.t.Helper()
	p := filepath.Join(r.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		r.t.Fatal(err)
	}
}

// proc writes process pid in namespace ns with the NSpid line nspids
// ("600\t1"). An empty ns is a namespace link that cannot be read, as
// another user's or a non-dumpable process's: a file where the link
// should be, which readlink refuses (EINVAL), since root reads any link.
func (r *nsRoot) proc(pid int, ns, nspids string, ticks uint64) {
	r.t.Helper()
	dir := strconv.Itoa(pid)
	r.write(dir+"/stat", statLine(pid, "claude", 'S', 1, ticks))
	r.write(dir+"/status", "Name:\tclaude\nUmask:\t0022\nState:\tS (sleeping)\nNSpid:\t"+nspids+"\nNSpgid:\t"+nspids+"\n")
	if ns == "" {
		r.write(dir+"/ns/pid", "")
		return
	}
	r.link(dir+"/ns/pid", ns)
}

func (r *nsRoot) host() *Host { return &Host{Root: r.root} }

func (r *nsRoot) find(ns string, nspid int) InNamespace {
	r.t.Helper()
	got, err := r.host().FindInNamespace(ns, nspid)
	if err != nil {
		r.t.Fatalf("FindInNamespace(%s, %d): %v", ns, nspid, err)
	}
	return got
}

// A namespace none of whose processes is in sight is
// gone only when this host sees every process of the machine: it runs in
// the initial PID namespace, its /proc hides nothing, and no process whose
// namespace it could not read may be the pid asked for. Anything short of
// that is not Whole, with the reason.
func TestFindInNamespaceWhole(t *testing.T) {
	const initial = InitialPIDNamespace
	for _, tc := range []struct {
		name  string
		own   string
		opts  string
		setup func(r *nsRoot)
		nspid int
		// want
		visible bool
		found   int
		whole   bool
		why     string
	}{
		{name: "initial namespace, the namespace gone", own: initial, opts: "rw", nspid: 1, whole: true},
		{name: "initial namespace, hidepid=invisible", own: initial, opts: "rw,hidepid=invisible", nspid: 1, why: "hidepid=invisible"},
		{name: "initial namespace, hidepid=2,gid=10", own: initial, opts: "rw,hidepid=2,gid=10", nspid: 1, why: "hidepid=2"},
		{name: "initial namespace, hidepid=0", own: initial, opts: "rw,hidepid=0", nspid: 1, whole: true},
		{name: "initial namespace, no proc mount line for the root", own: initial, opts: "", nspid: 1, why: "no proc mount at"},
		{name: "daemon in a container, the namespace out of sight", own: containerNS, opts: "rw", nspid: 1, why: "not the initial one"},
		{name: "own namespace unreadable", own: "", opts: "rw", nspid: 1, why: "cannot be read"},
		{name: "unreadable namespace link, innermost pid the one asked", own: initial, opts: "rw", nspid: 1,
			setup: func(r *nsRoot) { r.proc(600, "", "600\t1", 50) }, why: "pid 600"},
		{name: "unreadable namespace link, nested deeper, innermost the one asked", own: initial, opts: "rw", nspid: 1,
			setup: func(r *nsRoot) { r.proc(600, "", "600\t9\t1", 50) }, why: "pid 600"},
		{name: "unreadable namespace link, another innermost pid", own: initial, opts: "rw", nspid: 1,
			setup: func(r *nsRoot) { r.proc(600, "", "600\t3", 50) }, whole: true},
		{name: "unreadable namespace link, in the host's own namespace", own: initial, opts: "rw", nspid: 602,
			setup: func(r *nsRoot) { r.proc(602, "", "602", 50) }, whole: true},
		{name: "unreadable namespace link and status", own: initial, opts: "rw", nspid: 1,
			setup: func(r *nsRoot) {
				r.proc(600, "", "600\t1", 50)
				os.Remove(filepath.Join(r.root, "600/status"))
				os.Mkdir(filepath.Join(r.root, "600/status"), 0o755)
			},
			why: "neither"},
		{name: "unreadable namespace link, gone before its status was read", own: initial, opts: "rw", nspid: 1,
			setup: func(r *nsRoot) { r.proc(600, "", "600\t1", 50); os.Remove(filepath.Join(r.root, "600/status")) }, whole: true},
		{name: "visible namespace, pid found", own: initial, opts: "rw", nspid: 1,
			setup: func(r *nsRoot) { r.proc(500, claudeNS, "500\t1", 777) }, visible: true, found: 500},
		{name: "visible namespace, pid absent", own: initial, opts: "rw", nspid: 7,
			setup: func(r *nsRoot) { r.proc(500, claudeNS, "500\t1", 777) }, visible: true, whole: true},
		{name: "daemon in a container, nested namespace visible, pid absent", own: containerNS, opts: "rw", nspid: 7,
			setup: func(r *nsRoot) { r.proc(500, claudeNS, "500\t1", 777) }, visible: true, whole: true},
		{name: "visible namespace, pid absent, hidepid", own: initial, opts: "rw,hidepid=1", nspid: 7,
			setup: func(r *nsRoot) { r.proc(500, claudeNS, "500\t1", 777) }, visible: true, why: "hidepid=1"},
		{name: "visible namespace, pid absent, an unreadable process may be it", own: containerNS, opts: "rw", nspid: 7,
			setup: func(r *nsRoot) { r.proc(500, claudeNS, "500\t1", 777); r.proc(601, "", "601\t7", 9) }, visible: true, why: "pid 601"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newNSRoot(t, tc.own, tc.opts)
			if tc.setup != nil {
				tc.setup(r)
			}
			got := r.find(claudeNS, tc.nspid)
			if got.Visible != tc.visible || got.Found.PID != tc.found || got.Whole != tc.whole {
				t.Fatalf("got %+v, want visible %v found %d whole %v", got, tc.visible, tc.found, tc.whole)
			}
			if tc.found != 0 && (got.Found.BootID != fixtureBoot || got.Found.StartTicks != 777) {
				t.Fatalf("found %+v, want boot %s start 777", got.Found, fixtureBoot)
			}
			if !tc.whole && tc.found == 0 && !strings.Contains(got.Why, tc.why) {
				t.Fatalf("why %q, want it to say %q", got.Why, tc.why)
			}
			if tc.whole && got.Why != "" {
				t.Fatalf("whole, yet why %q", got.Why)
			}
		})
	}
}

// The real /proc of this machine: whether the answer is Whole follows
// from where this test runs, and a namespace that cannot exist (inode 1)
// is proven gone exactly when it is.
func TestFindInNamespaceWholeHere(t *testing.T) {
	h := NewHost()
	own := h.PIDNamespace()
	if own == "" {
		t.Skip("no namespace link")
	}
	hide, err := h.hidePID()
	if err != nil {
		t.Fatalf("the proc mount's options: %v", err)
	}
	got, err := h.FindInNamespace("pid:[1]", 1)
	if err != nil || got.Visible || got.Found.PID != 0 {
		t.Fatalf("a namespace no process is in: %+v, %v", got, err)
	}
	if os.Getuid() != 0 {
		// Another user's process may be pid 1 of its namespace.
		t.Logf("not root: %+v", got)
		return
	}
	if want := own == InitialPIDNamespace && hide == ""; got.Whole != want {
		t.Fatalf("whole %v (%s), want %v: own namespace %s, hidepid %q", got.Whole, got.Why, want, own, hide)
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/proc`:            "/proc",
		`/tmp/a\040b/proc`: "/tmp/a b/proc",
		`/x\134y`:          `/x\y`,
		`/trailing\04`:     `/trailing\04`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNSPIDs(t *testing.T) {
	for in, want := range map[string][2]int{
		"Name:\tsleep\nNSpid:\t5166\t1\nNStgid:\t5166\t1\n": {1, 2},
		"NSpid:\t42\n":      {42, 1},
		"NSpid:\t9\t8\t7\n": {7, 3},
		"Name:\tx\n":        {0, 0},
		"NSpid:\n":          {0, 0},
		"NSpid:\tx\n":       {0, 1},
	} {
		inner, levels, ok := nsPIDs([]byte(in))
		if inner != want[0] || (ok && levels != want[1]) || ok != (want[0] > 0) {
			t.Errorf("%q: %d %d %v, want %v", in, inner, levels, ok, want)
		}
	}
}
