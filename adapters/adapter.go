// Package adapters defines what an agent adapter reports to sessiond.
//
// An adapter observes: it reads an agent's files and the process table and
// says which sessions exist, who could own them and what their data shows.
// It never decides liveness (tracker does, from proc probes) and never writes
// sessiond's store (state does).
package adapters

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// Adapter is one agent's observer.
type Adapter interface {
	// Name is the agent name stored in records ("claude", "opencode", "codex").
	Name() string
	// Discover looks at the agent's data once. An error means "could not
	// look at all", never "found nothing"; inputs that failed while others
	// were read are reported in Observation.Errors instead.
	Discover(ctx context.Context, snap *proc.Snapshot) (Observation, error)
	// WatchPaths are directories whose changes hint that Discover should run
	// again soon. Hints only: a periodic Discover is the truth.
	WatchPaths() []string
}

// Rescanner is implemented by adapters that read incrementally: after a
// lost file-change event (watcher overflow) the next Discover must look at
// everything again.
type Rescanner interface {
	RequestRescan()
}

// Follower is implemented by adapters that can learn of a change outside
// the files they watch: OpenCode's servers announce a permission asked or
// a session gone idle on their event stream. Follow runs until ctx ends
// and calls wake for each change that may alter what a pass decides; the
// pass then looks as usual. An event is a reason to look now, never
// evidence of its own.
type Follower interface {
	Follow(ctx context.Context, wake func())
}

// Checkpointer is implemented by adapters that keep what they learned per
// input (a transcript's identity, size, read offsets and turn state) in
// memory: the tracker saves it in the store now and then, and hands it
// back after a restart, so the restart re-reads only inputs that changed.
// It is a cache of the inputs, never evidence of liveness: owners are
// probed as on any pass.
type Checkpointer interface {
	// Restore hands over what earlier Checkpoints saved, before the first
	// Discover. Entries the adapter cannot use (another format, another
	// configuration, garbage) it ignores, and reads those inputs again.
	Restore(saved map[string][]byte)
	// Checkpoint returns what changed since the last committed checkpoint.
	Checkpoint() Checkpoint
}

// Checkpoint is one save of a Checkpointer's changes.
type Checkpoint struct {
	// Put are the entries to write, by key; Del the keys to remove.
	Put map[string][]byte
	Del []string
	// Commit, called once the store has written Put and Del, marks them
	// saved. Not called when the write failed: the next Checkpoint then
	// returns them again.
	Commit func()
}

// Observation is one Discover pass.
type Observation struct {
	// Sessions are the sessions seen this pass, one per upstream id.
	Sessions []Observed
	// Quiet, when not nil, holds more sessions seen this pass: those the
	// adapter found quiet, handed over as a set it returns again, the same
	// pointer, while none of them changes (see QuietSet). An id in
	// Sessions is not in Quiet, or shadows it there.
	Quiet *QuietSet
	// Errors are inputs (a config root, a project dir, a database file)
	// that could not be read this pass. Sessions last seen in such an input,
	// or under it when it is a directory, keep their last known state and
	// get an adapter_error problem.
	Errors []InputError
	// Warnings are inputs that were read, but not whole: lines skipped as
	// corrupt, too long or glued, files or links skipped, entries that do
	// not parse. They change no status (the rest of the input was read);
	// they are named in health so the user can find the bad data.
	Warnings []InputError
	// Drift is what the adapter's reads did not understand, per agent
	// version (see Drift). It changes no status; health shows it, and
	// each session read from such data carries a format_drift problem.
	Drift []Drift
}

// Drift is what an adapter did not understand in the data one version of
// its agent wrote, of one kind and one sort of input: "claude 2.1.340: 2
// unknown line types (x, y) in 14 transcripts". It counts inputs, never
// lines, so reading an input again does not count it twice: each value's
// Inputs is how many inputs showed it now. package kit keeps it.
type Drift struct {
	// Version is the version the agent wrote into its own data (Claude's
	// transcript version, Codex's session_meta cli_version, OpenCode's
	// session version); "" when the data names none.
	Version string
	// Kind is what was not understood (DriftLineType, ...).
	Kind DriftKind
	// Input is the sort of input that showed it ("transcript", "rollout",
	// "registry entry", "hook").
	Input string
	// Inputs is how many inputs showed a value of this kind.
	Inputs int
	// Values are the values not understood, most inputs first, at most
	// kit's bound per version; Others counts the inputs that showed values
	// past it.
	Values []DriftValue
	Others int
}

// DriftValue is one value not understood and how many inputs showed it.
type DriftValue struct {
	Value  string
	Inputs int
}

// DriftKind names what an adapter did not understand.
type DriftKind string

// The kinds of drift.
const (
	// DriftLineType: a transcript line, rollout item or message part of a
	// type the adapter does not know (read for its metadata only).
	DriftLineType DriftKind = "line_type"
	// DriftStatus: a status value the adapter does not know (Claude's
	// registry status): the activity falls back to the transcript's.
	DriftStatus DriftKind = "status"
	// DriftWaitingFor: a waitingFor value the adapter does not know
	// (shown as "other").
	DriftWaitingFor DriftKind = "waiting_for"
	// DriftHookEvent: a hook event the adapter does not know (taken as
	// saying nothing of the activity).
	DriftHookEvent DriftKind = "hook_event"
	// DriftFieldType: a field the adapter reads came with another JSON
	// type than it knows ("timestamp: number"); the field is not used.
	DriftFieldType DriftKind = "field_type"
)

// InputError names an input and why it could not be read.
type InputError struct {
	Input string
	Err   error
}

func (e InputError) Error() string { return e.Input + ": " + e.Err.Error() }

// Observed is what an adapter saw of one session.
type Observed struct {
	UpstreamID string
	// Source is the input the session was found in (a project dir, a db
	// path).
	Source string
	// Root is the agent's data root the session belongs to (the Claude
	// config dir, the OpenCode data dir): the resume cursor's root.
	Root  string
	Cwd   string
	Title string
	// Owners are the processes that own or could own the session. Empty when
	// none is known. More than one only for inferred ownership.
	Owners []Owner
	// Activity is what the data says the session is doing. The tracker uses
	// it only while an owner lives.
	Activity session.Activity
	// ActivityEvidence says where Activity came from ("registry status",
	// "transcript tail", "server status").
	ActivityEvidence string
	// ActivitySource names the kind of signal Activity came from.
	ActivitySource session.ActivitySource
	// ActivityAt, when not zero, is when that signal was last written, if
	// that is not LastActivity (a registry's status update): a hook older
	// than it is not taken over it.
	ActivityAt time.Time
	// WaitingFor says what the session waits for, when Activity is
	// waiting or idle and the data says.
	WaitingFor *session.WaitingFor
	// LastActivity is the time of the session's last write, zero if unknown.
	LastActivity time.Time
	// InFlight lists work that was started and not finished: tool calls
	// without results, incomplete messages, a busy marker. With every owner
	// dead, any of it makes the session interrupted.
	InFlight []Issue
	// Problems are other problems the adapter found (orphan_processes).
	Problems []Issue
	// OwnersExact, when set, says why Owners is the whole truth (Codex:
	// the kernel's lock table names the writer lock's holder). A process
	// recorded as the owner that is not among Owners has then let the
	// session go, even while it lives on (Codex's app-server daemon
	// unloads a thread and serves others). A process sessiond launched
	// stays a candidate: it may not have taken the lock yet.
	OwnersExact string
	// Stamp, when not zero, is the adapter's promise that an Observed of
	// this session with the same Stamp is the same as this one, so the
	// tracker need not compare them field by field to know nothing
	// changed. Zero promises nothing.
	Stamp uint64
}

// Owner is a process that owns or may own a session.
type Owner struct {
	Identity proc.Identity
	// Inferred is true when the owner was inferred (cwd, open files) rather
	// than named by the agent's data, its argv or a launch.
	Inferred bool
	// Evidence says how the owner was found ("registry", "argv --resume",
	// "cwd match, holds db open").
	Evidence string
	// NoProbe, when set, is the liveness answer the agent's data already
	// gives, so the tracker uses it instead of probing the identity: Dead
	// for a registry entry written before this boot; Unknown for a process
	// of another machine (a shared home) or of a PID namespace this host
	// cannot see into, which must never be probed here, and never made
	// dead here, since its pid means nothing on this host.
	NoProbe *proc.Result
	// Unplaced marks an owner of this machine and boot whose pid on this
	// host cannot be found now (a PID namespace out of sight): NoProbe is
	// Unknown, Identity holds its pid in its namespace and its start
	// ticks, and Evidence names it exactly (its namespace and its pid
	// there), as it named it while it could be placed. A recorded owner
	// with that same Evidence and start ticks is this process, placed on
	// this host by an earlier pass (before a restart, too): the tracker
	// probes that identity instead, so its death ends the session.
	Unplaced bool
	// Shared is true when the owner is a server whose clients run
	// elsewhere (Codex's app-server daemon holds the sessions of the TUIs
	// of every pane): the tmux pane it runs in is not the session's.
	Shared bool
}

// Issue is one problem item an adapter reports.
type Issue struct {
	Kind session.ProblemKind
	// Key tells items of one kind apart (a tool call id, a pid).
	Key    string
	Detail string
	// Since is when the item started, zero if unknown.
	Since time.Time
	// Process is the process an orphan_processes item is about, so a reap
	// can check it is still that very process before signalling it.
	Process *proc.Identity
}

// HookReader is implemented by adapters whose agent runs hooks: commands
// it starts at points of a turn with the event's JSON on stdin.
// `sessionctl hook <agent>` posts that JSON to the daemon, which hands it
// here. Hooks refine activity (a pending approval shows in no file of
// Codex's); they never make a session running, and the tracker takes one
// only from a descendant of the session's owner.
type HookReader interface {
	// ReadHook reads one hook payload. An error says why it is not one.
	ReadHook(payload []byte) (Hook, error)
}

// ToolMarker is implemented by adapters whose agent names the session in
// the environment of every tool it runs (Codex: CODEX_THREAD_ID, one of
// proc's marker variables). Where one process serves many sessions
// (Codex's app-server runs every TUI session's tools), a tool of one
// session descends from the owner of all of them: a hook posted from a
// process whose ancestry carries another session's name came from a tool
// of that session, and the daemon refuses it.
type ToolMarker interface {
	// ToolSessionVar is the variable's name; it must be one of proc's
	// marker variables (only those are read).
	ToolSessionVar() string
}

// Hook is what one hook says about a session.
type Hook struct {
	UpstreamID string
	// Event is the agent's name for it ("PermissionRequest").
	Event string
	// Activity is what the event says the session does from now on;
	// empty when it says nothing about that (SessionStart, SessionEnd).
	Activity   session.Activity
	WaitingFor *session.WaitingFor
	Cwd        string
}

// Launcher is implemented by adapters whose agent sessiond can start and
// resume. It knows the agent's command line; package launch runs it.
type Launcher interface {
	// NewCommand is the command that starts a new session.
	NewCommand(spec LaunchSpec) (Command, error)
	// ResumeCommand continues the cursor's upstream session; with fork it
	// starts a new upstream session carrying the old one's history.
	ResumeCommand(cur session.ResumeCursor, spec LaunchSpec, fork bool) (Command, error)
	// Exists says whether the cursor's upstream session still exists:
	// Missing only when confirmed gone, Unknown when it could not tell.
	Exists(ctx context.Context, cur session.ResumeCursor) (Existence, error)
}

// LaunchSpec is what the user asked to launch.
type LaunchSpec struct {
	Cwd    string
	Prompt string
	// Args are extra agent arguments, appended as given.
	Args []string
	// Mode is "headless" or "tmux".
	Mode string
}

// Command is an agent command line to run.
type Command struct {
	Argv []string
	// Cwd is where it must run (a resume runs in the recorded cwd).
	Cwd string
	// UpstreamID is the agent's session id when it is chosen up front
	// (Claude's --session-id); empty when the agent picks it.
	UpstreamID string
	// Root is the agent data root the session will live in.
	Root string
	// Env is set in the agent's environment (e.g. its data root).
	Env map[string]string
	// OutputID, when UpstreamID is empty, finds the upstream id in the
	// agent's output (first group), so the record is linked early.
	OutputID *regexp.Regexp
}

// Existence is the answer of Launcher.Exists.
type Existence int

// Existence answers. Unknown must never be read as Missing: a transient
// error must not reset a conversation.
const (
	ExistenceUnknown Existence = iota
	Exists
	Missing
)

func (e Existence) String() string {
	switch e {
	case Exists:
		return "exists"
	case Missing:
		return "missing"
	}
	return "unknown"
}

// RepairTarget is the session a repair is about.
type RepairTarget struct {
	UpstreamID string
	// Root is the agent data root (the resume cursor's), Source the input
	// the session was last seen in.
	Root   string
	Source string
	Cwd    string
	// OfflineOnly limits a repair to steps that need no live agent (the
	// automatic policy's "offline" repairs).
	OfflineOnly bool
}

// Repairer is implemented by adapters that can clean up a dead session's
// agent data (stale markers, work left in flight). Every repair is planned
// first; Apply plans again and applies only what is still safe, so it is
// idempotent: a repaired session plans nothing.
type Repairer interface {
	PlanRepair(ctx context.Context, t RepairTarget) ([]session.Step, error)
	ApplyRepair(ctx context.Context, t RepairTarget) ([]session.Step, error)
}

// Aborter is implemented by adapters whose agent can be told to stop a
// busy turn from outside (OpenCode's server API). Abort plans and acts in
// one go and reports each step.
type Aborter interface {
	Abort(ctx context.Context, t RepairTarget) ([]session.Step, error)
}

// Prompter is implemented by adapters that can hand a prompt to a live,
// idle session through the agent's own API (OpenCode's server). ok is
// false when there is no such way for this session now: sessiond then
// types it into the session's tmux pane, if it has one.
type Prompter interface {
	Prompt(ctx context.Context, t RepairTarget, text string) (via string, ok bool, err error)
}

// QuietSet is a set of observations an adapter hands out again, as the
// same pointer, pass after pass, for as long as every one of them is what
// it would observe afresh. Most sessions a daemon knows are history; with
// the set, a pass that finds it unchanged does nothing per session in it
// (looking at every session every pass was the idle cost at
// 10,000 of them). A set never changes once returned: a change to one of
// its sessions is a new set, or that session returned in
// Observation.Sessions, which shadows its entry here for that pass.
type QuietSet struct {
	sessions []Observed // sorted by UpstreamID, unique
}

// NewQuietSet makes a set of observations sorted by UpstreamID, one per
// id. The set owns the slice from then on: the caller must not change it,
// nor anything its observations point to.
func NewQuietSet(sorted []Observed) *QuietSet {
	return &QuietSet{sessions: sorted}
}

// len is the number of sessions in the set (0 for nil).
func (q *QuietSet) len() int {
	if q == nil {
		return 0
	}
	return len(q.sessions)
}

// Find returns the set's observation of id, or nil. It must not be
// changed.
func (q *QuietSet) Find(id string) *Observed {
	if q == nil {
		return nil
	}
	i, ok := slices.BinarySearchFunc(q.sessions, id, func(o Observed, id string) int { return strings.Compare(o.UpstreamID, id) })
	if !ok {
		return nil
	}
	return &q.sessions[i]
}

// Each calls fn for each observation of the set, in id order, until fn
// returns false. The observations must not be changed.
func (q *QuietSet) Each(fn func(*Observed) bool) {
	if q == nil {
		return
	}
	for i := range q.sessions {
		if !fn(&q.sessions[i]) {
			return
		}
	}
}

// Len is the number of sessions of the pass: Sessions and the quiet ones
// they do not shadow.
func (o Observation) Len() int {
	n := len(o.Sessions) + o.Quiet.len()
	if o.Quiet.len() > 0 {
		for i := range o.Sessions {
			if o.Quiet.Find(o.Sessions[i].UpstreamID) != nil {
				n--
			}
		}
	}
	return n
}

// All returns every session of the pass, Sessions and the quiet ones
// Sessions does not shadow, in a new slice sorted by UpstreamID. For
// callers that want one list (tests, one-off lookups); the tracker reads
// the two apart.
func (o Observation) All() []Observed {
	out := make([]Observed, 0, len(o.Sessions)+o.Quiet.len())
	out = append(out, o.Sessions...)
	seen := make(map[string]bool, len(o.Sessions))
	for i := range o.Sessions {
		seen[o.Sessions[i].UpstreamID] = true
	}
	o.Quiet.Each(func(q *Observed) bool {
		if !seen[q.UpstreamID] {
			out = append(out, *q)
		}
		return true
	})
	slices.SortStableFunc(out, func(a, b Observed) int { return strings.Compare(a.UpstreamID, b.UpstreamID) })
	return out
}
