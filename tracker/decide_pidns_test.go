package tracker

import (
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// Across a restart: a claude in a container was
// found at host pid 500, and the record keeps that identity as its owner,
// with the evidence that names the namespace and the pid in it. The
// restarted daemon's adapter cannot place it (its namespace went with it,
// and this host cannot prove it gone): it reports it Unplaced, Unknown.
// The recorded identity is that process; its death ends the session. Any
// doubt about that keeps today's unknown.
func TestDecideUnplacedOwnerIsTheRecordedOne(t *testing.T) {
	const ev = "registry, pid 1 of PID namespace pid:[4026532178]"
	host := proc.Identity{BootID: "boot-a", PID: 500, StartTicks: 777}
	unplaced := func(mod func(*adapters.Owner)) *adapters.Observed {
		o := adapters.Owner{Identity: proc.Identity{PID: 1, StartTicks: 777}, Evidence: ev, Unplaced: true,
			NoProbe: &proc.Result{Liveness: proc.Unknown, Reason: "pid 1 lives in PID namespace pid:[4026532178], not this daemon's"}}
		if mod != nil {
			mod(&o)
		}
		return &adapters.Observed{UpstreamID: "up-1", Owners: []adapters.Owner{o},
			InFlight: []adapters.Issue{{Kind: session.ProblemStaleBusyMarker, Key: "1", Detail: "sessions/1.json says busy (pid 1)"}},
			Problems: []adapters.Issue{{Kind: session.ProblemForeignPIDNamespace, Key: "1", Detail: "pid 1 lives in PID namespace pid:[4026532178], not this daemon's"}}}
	}
	running := func(mod func(*session.Record)) *session.Record {
		r := rec(session.StatusRunning, &host)
		r.Activity, r.OwnerEvidence = session.ActivityBusy, ev
		if mod != nil {
			mod(r)
		}
		return r
	}
	for _, tc := range []struct {
		name string
		rec  *session.Record
		obs  *adapters.Observed
		boot string
		live map[proc.Identity]proc.Liveness
		want session.Status
	}{
		{name: "the recorded owner is dead: interrupted", rec: running(nil), obs: unplaced(nil), boot: "boot-a", want: session.StatusInterrupted},
		{name: "the recorded owner lives: running", rec: running(nil), obs: unplaced(nil), boot: "boot-a",
			live: map[proc.Identity]proc.Liveness{host: proc.Alive}, want: session.StatusRunning},
		{name: "a stopped record stays stopped, not probed", rec: func() *session.Record {
			r := rec(session.StatusInterrupted, &host)
			r.OwnerEvidence = ev
			return r
		}(), obs: unplaced(nil), boot: "boot-a", live: map[proc.Identity]proc.Liveness{host: proc.Alive}, want: session.StatusInterrupted},
		{name: "not marked Unplaced: unknown", rec: running(nil), obs: unplaced(func(o *adapters.Owner) { o.Unplaced = false }), boot: "boot-a", want: session.StatusUnknown},
		{name: "other evidence (another pid or namespace): unknown", rec: running(nil),
			obs: unplaced(func(o *adapters.Owner) { o.Evidence = "registry, pid 1 of PID namespace pid:[4026532999]" }), boot: "boot-a", want: session.StatusUnknown},
		{name: "recorded by another kind of evidence: unknown", rec: running(func(r *session.Record) { r.OwnerEvidence = "registry" }),
			obs: unplaced(nil), boot: "boot-a", want: session.StatusUnknown},
		{name: "other start ticks: unknown", rec: running(nil), obs: unplaced(func(o *adapters.Owner) { o.Identity.StartTicks = 778 }), boot: "boot-a", want: session.StatusUnknown},
		{name: "no start ticks: unknown", rec: running(func(r *session.Record) { r.Owner = &proc.Identity{BootID: "boot-a", PID: 500} }),
			obs: unplaced(func(o *adapters.Owner) { o.Identity.StartTicks = 0 }), boot: "boot-a", want: session.StatusUnknown},
		{name: "recorded in an earlier boot: unknown", rec: running(nil), obs: unplaced(nil), boot: "boot-b", want: session.StatusUnknown},
		{name: "this boot not known: unknown", rec: running(nil), obs: unplaced(nil), boot: "", want: session.StatusUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _ := decide(tc.rec, evidence{obs: tc.obs, probe: probeTable(tc.live), now: t0, grace: 30 * time.Second, boot: tc.boot})
			if out.Status != tc.want {
				t.Fatalf("status %s (%s), want %s", out.Status, out.StatusReason, tc.want)
			}
			switch tc.want {
			case session.StatusInterrupted:
				if tc.rec.Status == session.StatusRunning && (!strings.Contains(out.StatusReason, "owner pid 500 is dead") || out.Owner == nil || *out.Owner != host) {
					t.Fatalf("reason %q owner %v, want owner pid 500 dead", out.StatusReason, out.Owner)
				}
			case session.StatusRunning:
				if out.Owner == nil || *out.Owner != host || out.OwnerEvidence != ev {
					t.Fatalf("owner %v (%s), want %v (%s)", out.Owner, out.OwnerEvidence, host, ev)
				}
			}
		})
	}
}
