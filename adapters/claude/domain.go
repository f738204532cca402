package claude

import (
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/claude/transcript"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// Claude Code's registry entries say where their pid lives in pidDomain,
// which it builds (2.1.328, checked in the binary and on a run) as
//
//	linux:<trimmed /etc/machine-id, "" when unreadable>:<readlink /proc/self/ns/pid>
//
// on Linux, "linux:<hostname>" on Windows and the constant "linux" on
// macOS. It names a machine and a PID namespace, never a boot: Claude keeps
// no boot id. An entry of an earlier boot is told by its startedAt being
// earlier than this boot's start; procStart still guards against a reused
// pid. Nothing here may read pidDomain as a boot id.

// hostDomain is this host's side of the comparison, read once per pass
// from the (caching) process host.
type hostDomain struct {
	// domain is the pidDomain a claude of this host and namespace writes.
	domain  string
	machine string
	// boot is when this boot started; zero when it cannot be told.
	boot time.Time
}

// domainHost is the part of the process host the pidDomain check needs.
type domainHost interface {
	MachineID() string
	PIDNamespace() string
	BootTime() (time.Time, error)
	FindInNamespace(ns string, nspid int) (proc.InNamespace, error)
}

func readHostDomain(h domainHost) hostDomain {
	var d hostDomain
	if h == nil {
		return d
	}
	d.machine = h.MachineID()
	d.domain = claudeDomain(runtime.GOOS, d.machine, h.PIDNamespace())
	d.boot, _ = h.BootTime()
	return d
}

// claudeDomain is the pidDomain Claude Code writes on goos.
func claudeDomain(goos, machine, ns string) string {
	if goos == "linux" {
		return "linux:" + machine + ":" + ns
	}
	return "linux"
}

// placeKind says where a registry entry's process lives, seen from here.
type placeKind int

const (
	// placeHere: this machine and PID namespace, or an entry that does not
	// say (older versions): probe its pid.
	placeHere placeKind = iota
	// placeEarlierBoot: this machine, but written before this boot. Dead.
	placeEarlierBoot
	// placeOtherHost: another machine (a shared or synced home). Never
	// probed, never made dead here.
	placeOtherHost
	// placeOtherNamespace: this machine, another PID namespace (a
	// container). Probed through its host pid when that is known: found
	// in the namespace now, or found there before (then whether or not
	// the namespace is still in sight); else like another host.
	placeOtherNamespace
	// placeGoneFromNamespace: another PID namespace, and this host sees
	// every process that could be that pid in it (proc.InNamespace.Whole):
	// none is. Dead.
	placeGoneFromNamespace
)

// place is where one entry's owner lives.
type place struct {
	kind placeKind
	// pid is the pid to probe on this host: the entry's own pid here, the
	// host pid of the namespace's process, or 0 when it cannot be found.
	pid int
	// host is the identity an entry of another PID namespace was found at
	// on an earlier pass (regFile.host), zero when it was not.
	host proc.Identity
	// ns is the PID namespace of an entry of this machine's other
	// namespaces, "" for any other.
	ns string
	// detail says why, for a status reason or a problem.
	detail string
	// problem is set for an owner that cannot be probed from here.
	problem session.ProblemKind
}

// locate places an entry's owner. ns lookups are memoized per pass. host
// is the host process this entry's process was found at on an earlier pass
// (zero when none): a process never leaves its PID namespace and an
// identity is unique per boot, so that identity stays its owner, to probe,
// whether or not its namespace is still in sight. A container's pid 1
// takes its namespace with it when it dies; its death must end the session.
func (v *procView) locate(e *registryEntry, host proc.Identity) place {
	here := place{kind: placeHere, pid: e.PID}
	d := v.dom
	if e.PIDDomain != "" && e.PIDDomain != d.domain {
		machine, ns, linux := splitDomain(e.PIDDomain)
		if !linux || machine != d.machine || runtime.GOOS != "linux" {
			return place{kind: placeOtherHost, problem: session.ProblemForeignHost,
				detail: fmt.Sprintf("pid %d was recorded by another machine (%s; this is %s): not probed here, and never made dead here",
					e.PID, describeDomain(e.PIDDomain, machine, linux), shortMachine(d.machine))}
		}
		// Same machine, another PID namespace.
		if p := v.earlierBoot(e); p != nil {
			return *p
		}
		if !host.IsZero() {
			return place{kind: placeOtherNamespace, pid: host.PID, host: host, ns: ns,
				detail: fmt.Sprintf("pid %d of PID namespace %s, found at host pid %d", e.PID, ns, host.PID)}
		}
		found, err := v.findInNamespace(ns, e.PID)
		switch {
		case err != nil:
			return place{kind: placeOtherNamespace, ns: ns, problem: session.ProblemForeignPIDNamespace,
				detail: fmt.Sprintf("pid %d lives in PID namespace %s, not this daemon's: %v", e.PID, ns, err)}
		case found.Found.PID != 0:
			return place{kind: placeOtherNamespace, pid: found.Found.PID, ns: ns,
				detail: fmt.Sprintf("pid %d of PID namespace %s", e.PID, ns)}
		case found.Whole && found.Visible:
			return place{kind: placeGoneFromNamespace, ns: ns,
				detail: fmt.Sprintf("pid %d does not exist in PID namespace %s", e.PID, ns)}
		case found.Whole:
			return place{kind: placeGoneFromNamespace, ns: ns,
				detail: fmt.Sprintf("pid %d of PID namespace %s is gone: no process of that namespace is left, and this daemon sees every process of the machine", e.PID, ns)}
		case found.Visible:
			return place{kind: placeOtherNamespace, ns: ns, problem: session.ProblemForeignPIDNamespace,
				detail: fmt.Sprintf("pid %d lives in PID namespace %s, not this daemon's: not in sight there, but it may be hidden (%s)", e.PID, ns, found.Why)}
		}
		return place{kind: placeOtherNamespace, ns: ns, problem: session.ProblemForeignPIDNamespace,
			detail: fmt.Sprintf("pid %d lives in PID namespace %s, not this daemon's: no process of that namespace is visible from here (%s)", e.PID, ns, found.Why)}
	}
	if p := v.earlierBoot(e); p != nil {
		return *p
	}
	return here
}

// earlierBoot places an entry written before this boot began.
func (v *procView) earlierBoot(e *registryEntry) *place {
	if e.StartedAt.IsZero() || v.dom.boot.IsZero() || !e.StartedAt.Before(v.dom.boot) {
		return nil
	}
	return &place{kind: placeEarlierBoot, detail: fmt.Sprintf("pid %d started at %s, before this boot (%s): rebooted since",
		e.PID, e.StartedAt.UTC().Format(time.RFC3339), v.dom.boot.UTC().Format(time.RFC3339))}
}

func (v *procView) findInNamespace(ns string, nspid int) (proc.InNamespace, error) {
	if v.nsFound == nil {
		v.nsFound = map[nsKey]nsAnswer{}
	}
	k := nsKey{ns, nspid}
	if a, ok := v.nsFound[k]; ok {
		return a.in, a.err
	}
	var a nsAnswer
	if v.domHost == nil {
		a.err = fmt.Errorf("no process host to look into namespaces")
	} else {
		a.in, a.err = v.domHost.FindInNamespace(ns, nspid)
	}
	v.nsFound[k] = a
	return a.in, a.err
}

type nsKey struct {
	ns  string
	pid int
}

type nsAnswer struct {
	in  proc.InNamespace
	err error
}

// splitDomain reads "linux:<machine>:<ns>" (ns "" for Windows's
// "linux:<hostname>"); linux is false for anything else (macOS's "linux").
func splitDomain(s string) (machine, ns string, linux bool) {
	rest, ok := strings.CutPrefix(s, "linux:")
	if !ok {
		return "", "", false
	}
	machine, ns, _ = strings.Cut(rest, ":")
	return machine, ns, true
}

func describeDomain(raw, machine string, linux bool) string {
	switch {
	case !linux:
		return fmt.Sprintf("pidDomain %q, as Claude Code writes it on macOS", transcript.Shorten(raw, 40))
	case machine == "":
		return "a machine without a readable machine id"
	}
	return "machine " + shortMachine(machine)
}

func shortMachine(m string) string {
	if m == "" {
		return "a machine without a readable machine id"
	}
	if len(m) > 12 {
		return m[:12] + "…"
	}
	return m
}

// unprobed is the liveness a place settles without a probe, if any.
func (p place) unprobed() *proc.Result {
	switch {
	case p.dead():
		return &proc.Result{Liveness: proc.Dead, Reason: p.detail}
	case p.problem != "":
		return &proc.Result{Liveness: proc.Unknown, Reason: p.detail}
	}
	return nil
}

// evidence is how an entry placed here names its owner: an entry of
// another PID namespace says which pid of which namespace, the same
// whether or not its host pid is found, so that the tracker can tell a
// recorded owner found at its host pid is that process
// (adapters.Owner.Unplaced).
func (p place) evidence(e *registryEntry) string {
	if p.ns == "" {
		return evidenceRegistry
	}
	return fmt.Sprintf("%s, pid %d of PID namespace %s", evidenceRegistry, e.PID, p.ns)
}

// unplaced: an entry of this machine and boot in another PID namespace
// whose host pid cannot be found now.
func (p place) unplaced() bool { return p.kind == placeOtherNamespace && p.pid == 0 }

// dead reports a place that by itself proves the owner gone.
func (p place) dead() bool { return p.kind == placeEarlierBoot || p.kind == placeGoneFromNamespace }

// issue is the problem a place reports, if any.
func (p place) issue(e *registryEntry) *adapters.Issue {
	if p.problem == "" {
		return nil
	}
	return &adapters.Issue{Kind: p.problem, Key: fmt.Sprint(e.PID), Detail: p.detail, Since: e.StartedAt}
}
