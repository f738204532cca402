// Package session is sessiond's data model: the record of one agent session,
// its status vocabulary, its problems and the events that record its changes.
//
// It holds no I/O. state persists these types, tracker is the only code that
// decides a record's Status, and api serves them. Keeping the vocabulary in a
// leaf package lets adapters speak it without importing the store.
package session

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sessiond/sessiond/proc"
)

// Status says whether a session's owning process lives. Only tracker sets it.
type Status string

// The statuses of the status model (docs/design.md#the-status-model).
const (
	// StatusStarting: launched by sessiond and still inside the grace period.
	StatusStarting Status = "starting"
	// StatusRunning: an owner (or, for inferred ownership, any candidate) probes Alive.
	StatusRunning Status = "running"
	// StatusStopped: every owner is confirmed dead and nothing was in flight.
	StatusStopped Status = "stopped"
	// StatusInterrupted: every owner is confirmed dead with a turn in flight.
	StatusInterrupted Status = "interrupted"
	// StatusUnknown: liveness cannot be decided yet (no candidate owner and
	// data that moved inside the grace period, or a probe that failed).
	StatusUnknown Status = "unknown"
)

// Terminal reports whether the status means the owner is gone. A terminal
// session can still come back to running when a live process claims its
// upstream id again (invariant 4 of docs/design.md).
func (s Status) Terminal() bool { return s == StatusStopped || s == StatusInterrupted }

// Valid reports whether s is one of the known statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusStarting, StatusRunning, StatusStopped, StatusInterrupted, StatusUnknown:
		return true
	}
	return false
}

// Activity says what a running session is doing, as its agent's data shows.
type Activity string

// The activities of the status model (docs/design.md#the-status-model).
const (
	ActivityBusy    Activity = "busy"
	ActivityIdle    Activity = "idle"
	ActivityWaiting Activity = "waiting" // for the user: a permission or a question
	ActivityUnknown Activity = "unknown"
)

// ActivitySource names the signal a running session's activity came from.
type ActivitySource string

// The sources, in the order an adapter prefers them: the agent's own
// live state, a hook the agent ran, the agent's transcript, its server.
const (
	// SourceRegistry: the agent's own live-session file (Claude's
	// sessions/<pid>.json status).
	SourceRegistry ActivitySource = "registry"
	// SourceHook: a hook the agent ran (`sessionctl hook`), checked
	// against the owner's identity.
	SourceHook ActivitySource = "hook"
	// SourceTranscript: the turn state at the end of the agent's
	// transcript or rollout.
	SourceTranscript ActivitySource = "transcript"
	// SourceServer: the agent's server (OpenCode's session status).
	SourceServer ActivitySource = "server"
)

// WaitingKind says what a session waits for from its user.
type WaitingKind string

// The kinds of waiting.
const (
	// WaitingPermission: a tool call waits for the user's approval.
	WaitingPermission WaitingKind = "permission"
	// WaitingQuestion: the agent asked the user a question.
	WaitingQuestion WaitingKind = "question"
	// WaitingInput: the turn ended; the agent waits for the next prompt.
	WaitingInput WaitingKind = "input"
	// WaitingOther: the agent says it waits for the user, for something
	// else (a dialog, a sandbox request); Detail has its words.
	WaitingOther WaitingKind = "other"
)

// WaitingFor says what a running session waits for: set while its
// activity is waiting (permission, question, other) or idle (input).
type WaitingFor struct {
	Kind WaitingKind `json:"kind"`
	// Tool is the tool waiting for permission ("Bash").
	Tool string `json:"tool,omitempty"`
	// Input is a short form of that tool's input (its command, its file).
	Input string `json:"input,omitempty"`
	// Question is the question asked.
	Question string `json:"question,omitempty"`
	// Detail is the agent's own words for it, when it has some
	// ("permission prompt", "dialog open").
	Detail string `json:"detail,omitempty"`
}

// Equal reports whether w and o say the same (both nil is equal).
func (w *WaitingFor) Equal(o *WaitingFor) bool {
	if w == nil || o == nil {
		return w == o
	}
	return *w == *o
}

// ProblemKind names a kind of trouble with a session.
type ProblemKind string

// The problem kinds of the status model (docs/design.md#the-status-model).
const (
	// ProblemOrphanedToolCall: a tool call that never got its result.
	ProblemOrphanedToolCall ProblemKind = "orphaned_tool_call"
	// ProblemIncompleteMessage: an assistant message that never completed.
	ProblemIncompleteMessage ProblemKind = "incomplete_message"
	// ProblemStaleBusyMarker: the agent's own "busy" marker outlived its process.
	ProblemStaleBusyMarker ProblemKind = "stale_busy_marker"
	// ProblemStalled: a live owner busy with no progress past the threshold.
	ProblemStalled ProblemKind = "stalled"
	// ProblemOrphanProcesses: tool processes still running after their owner died.
	ProblemOrphanProcesses ProblemKind = "orphan_processes"
	// ProblemAdapterError: the adapter could not look; the status is the last known.
	ProblemAdapterError ProblemKind = "adapter_error"
	// ProblemNotDiscovered: a launched session whose owner lives but whose
	// agent data has not shown it past the grace period.
	ProblemNotDiscovered ProblemKind = "not_discovered"
	// ProblemOwnerAmbiguous: several live processes could own the session.
	ProblemOwnerAmbiguous ProblemKind = "owner_ambiguous"
	// ProblemLaunchFailed: a process sessiond launched exited within seconds
	// (a login or usage error); the detail holds its exit and log tail.
	ProblemLaunchFailed ProblemKind = "launch_failed"
	// ProblemForeignHost: the agent's data names an owner on another
	// machine (a shared or synced home). Its pid means nothing here: it is
	// never probed, and the session is never made stopped or interrupted
	// by this host; its status is unknown.
	ProblemForeignHost ProblemKind = "foreign_host"
	// ProblemForeignPIDNamespace: the owner lives in a PID namespace (a
	// container) this host cannot see into, so its pid cannot be probed.
	ProblemForeignPIDNamespace ProblemKind = "foreign_pid_namespace"
	// ProblemFormatDrift: the session's data holds what the adapter does
	// not understand (a line type, a status value of a newer version of
	// the agent): its activity may be approximate. Liveness is unaffected:
	// it comes from the owner's process alone.
	ProblemFormatDrift ProblemKind = "format_drift"
)

// InFlight reports whether a problem of this kind is evidence that a turn
// was in flight when the owner died (which makes a dead session interrupted
// rather than stopped).
func (k ProblemKind) InFlight() bool {
	switch k {
	case ProblemOrphanedToolCall, ProblemIncompleteMessage, ProblemStaleBusyMarker:
		return true
	}
	return false
}

// Problem is one thing wrong with a session. Since is when it was first seen
// and survives re-observation of the same problem (same Kind and Key).
type Problem struct {
	Kind   ProblemKind `json:"kind"`
	Detail string      `json:"detail"`
	Since  time.Time   `json:"since"`
	// Key tells two problems of one kind apart (a tool call id, a pid), so
	// Since is kept per item. Empty when there is one problem of the kind.
	Key string `json:"key,omitempty"`
}

// ExitStatus is how a launched process ended, collected by sessiond while
// it was the parent.
type ExitStatus struct {
	PID int `json:"pid"`
	// Code is the exit code, or -1 when a signal ended the process.
	Code   int       `json:"code"`
	Signal string    `json:"signal,omitempty"`
	At     time.Time `json:"at"`
	// LogTail is the end of the process's log, for a fast failure's reason.
	LogTail string `json:"log_tail,omitempty"`
}

// ResumeCursorVersion is the schema version of ResumeCursor this build
// writes and accepts.
const ResumeCursorVersion = 1

// ResumeCursor is what a follow-up needs to continue the same upstream
// conversation after any restart.
type ResumeCursor struct {
	SchemaVersion int    `json:"schema_version"`
	Agent         string `json:"agent"`
	UpstreamID    string `json:"upstream_id"`
	Cwd           string `json:"cwd"`
	Root          string `json:"root"`
}

// Check says what keeps c from resuming session rec, or nil when nothing
// does. A nil c is one such thing: a session gets its cursor only once the
// agent's own data confirms its upstream id.
func (c *ResumeCursor) Check(rec *Record) error {
	switch {
	case c == nil:
		return fmt.Errorf("session %s has no resume cursor yet: its upstream id has not been confirmed by the agent's own data", rec.ID)
	case c.SchemaVersion != ResumeCursorVersion:
		return fmt.Errorf("resume cursor of %s has schema_version %d; this sessiond reads version %d", rec.ID, c.SchemaVersion, ResumeCursorVersion)
	case c.Agent == "" || c.Agent != rec.Agent:
		return fmt.Errorf("resume cursor of %s is malformed: agent %q, session agent %q", rec.ID, c.Agent, rec.Agent)
	case c.UpstreamID == "":
		return fmt.Errorf("resume cursor of %s is malformed: no upstream_id", rec.ID)
	case !filepath.IsAbs(c.Cwd):
		return fmt.Errorf("resume cursor of %s is malformed: cwd %q is not absolute", rec.ID, c.Cwd)
	case c.Root == "":
		return fmt.Errorf("resume cursor of %s is malformed: no root", rec.ID)
	}
	return nil
}

// Pane is a tmux pane: the server's socket and the pane's id. A pane id
// ("%3") is unique within its server for the server's life.
type Pane struct {
	// Socket is the tmux server's socket path (the first field of $TMUX).
	Socket string `json:"socket"`
	// ID is the pane id ($TMUX_PANE), "%" and a number.
	ID string `json:"id"`
}

// PaneFromEnv reads the pane a process runs in from its TMUX
// ("socket,server pid,session") and TMUX_PANE variables: nil when either
// is missing or malformed; serverPID is 0 when TMUX names no server pid.
func PaneFromEnv(tmux, paneID string) (p *Pane, serverPID int) {
	f := strings.Split(tmux, ",")
	if !filepath.IsAbs(f[0]) || len(paneID) < 2 || paneID[0] != '%' {
		return nil, 0
	}
	for _, c := range paneID[1:] {
		if c < '0' || c > '9' {
			return nil, 0
		}
	}
	if len(f) > 1 {
		if n, err := strconv.Atoi(f[1]); err == nil && n > 0 {
			serverPID = n
		}
	}
	return &Pane{Socket: f[0], ID: paneID}, serverPID
}

// Record is sessiond's stored record of one session. The JSON names of the
// fields listed in the daemon issue's contract are fixed.
type Record struct {
	// V is the record's schema version, so stored records can be migrated.
	V int `json:"v"`
	// ID is sessiond's own short random id.
	ID string `json:"id"`
	// Agent is the adapter name ("claude", "opencode", "codex").
	Agent string `json:"agent"`
	// UpstreamID is the agent's own session id; (Agent, UpstreamID) is unique.
	// Empty for a launched session whose agent has not yet shown its id.
	UpstreamID string `json:"upstream_id"`

	Status   Status   `json:"status"`
	Activity Activity `json:"activity"`
	// StatusReason says in words why the status is what it is.
	StatusReason string `json:"status_reason,omitempty"`
	// ActivitySince is when the activity (with its waiting_for) last
	// changed; ActivitySource which signal says it. Both are empty while
	// the session is not running.
	ActivitySince  *time.Time     `json:"activity_since,omitempty"`
	ActivitySource ActivitySource `json:"activity_source,omitempty"`
	// WaitingFor says what the session waits for from its user, while
	// waiting (permission, question) or idle (input).
	WaitingFor *WaitingFor `json:"waiting_for,omitempty"`
	// PromptAt is when sessiond last handed the session a prompt (a send,
	// typed or through its agent's server). The next prompt waits until
	// the session has shown activity since (ActivitySince after it): until
	// then the prompt may still be on its way in, and another would land
	// on top of it. Kept across restarts; only the tracker writes it.
	PromptAt *time.Time `json:"prompt_delivered_at,omitempty"`

	// Owner is the process that owns the session, when one is known.
	Owner *proc.Identity `json:"owner,omitempty"`
	// OwnerInferred is true when Owner was inferred (cwd, open files) rather
	// than named by the agent's data or by a launch.
	OwnerInferred bool `json:"owner_inferred,omitempty"`
	// OwnerEvidence says how the owner was found.
	OwnerEvidence string `json:"owner_evidence,omitempty"`
	// Candidates are every process that could own the session when ownership
	// is inferred and ambiguous; the session runs while any of them lives.
	Candidates []proc.Identity `json:"candidates,omitempty"`

	Cwd      string `json:"cwd"`
	Title    string `json:"title,omitempty"`
	Launched bool   `json:"launched"`
	// LaunchedAt is when sessiond last started the owner (a launch or a
	// resume); the launch grace period counts from it.
	LaunchedAt *time.Time `json:"launched_at,omitempty"`
	// Mode is how sessiond launched it: "headless" or "tmux".
	Mode string `json:"mode,omitempty"`
	// Tmux is the tmux session holding it, in tmux mode.
	Tmux string `json:"tmux_session,omitempty"`
	// Pane is the tmux pane the running owner is in, whoever started it.
	Pane *Pane `json:"tmux_pane,omitempty"`
	// LogPath is the launched process's stdout and stderr.
	LogPath string `json:"log_path,omitempty"`
	// Exit is how the launched owner ended, when sessiond was its parent.
	Exit *ExitStatus `json:"exit,omitempty"`
	// Source is the input the session was discovered in (a config root, a
	// database file), so an error reading that input can be tied to it.
	Source string `json:"source,omitempty"`

	Problems []Problem `json:"problems"`

	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	StoppedAt      *time.Time `json:"stopped_at"`
	LastActivityAt *time.Time `json:"last_activity_at"`
	// LastSeenAt is the last time an adapter observed the session.
	LastSeenAt *time.Time `json:"last_seen_at,omitempty"`

	Resume *ResumeCursor `json:"resume"`
}

// PromptPending reports whether a prompt sessiond handed the session has
// not shown in its activity yet: no activity has begun since it was
// delivered. Then another prompt must wait (it would land on top of the
// first, or in whatever the first brought up).
func (r *Record) PromptPending() bool { return PromptPending(r.PromptAt, r.ActivitySince) }

// PromptPending reports whether a prompt handed over at promptAt has not
// shown in the activity since activitySince (nil: none handed over).
func PromptPending(promptAt, activitySince *time.Time) bool {
	return promptAt != nil && (activitySince == nil || !activitySince.After(*promptAt))
}

// Problem returns the first problem of the kind, or nil.
func (r *Record) Problem(kind ProblemKind) *Problem {
	for i := range r.Problems {
		if r.Problems[i].Kind == kind {
			return &r.Problems[i]
		}
	}
	return nil
}

// Clone returns a deep copy, so a decision can be compared with its input.
func (r *Record) Clone() *Record {
	if r == nil {
		return nil
	}
	c := *r
	if r.Owner != nil {
		o := *r.Owner
		c.Owner = &o
	}
	c.Candidates = append([]proc.Identity(nil), r.Candidates...)
	c.Problems = append([]Problem(nil), r.Problems...)
	c.StoppedAt = cloneTime(r.StoppedAt)
	c.LaunchedAt = cloneTime(r.LaunchedAt)
	if r.Exit != nil {
		e := *r.Exit
		c.Exit = &e
	}
	c.LastActivityAt = cloneTime(r.LastActivityAt)
	c.ActivitySince = cloneTime(r.ActivitySince)
	c.PromptAt = cloneTime(r.PromptAt)
	if r.WaitingFor != nil {
		w := *r.WaitingFor
		c.WaitingFor = &w
	}
	c.LastSeenAt = cloneTime(r.LastSeenAt)
	if r.Pane != nil {
		p := *r.Pane
		c.Pane = &p
	}
	if r.Resume != nil {
		rc := *r.Resume
		c.Resume = &rc
	}
	return &c
}

func cloneTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}

// EventType names what an event records.
type EventType string

// Event types.
const (
	// EventCreated: a session record was created (discovered or launched).
	EventCreated EventType = "session.created"
	// EventStatus: the status changed (From -> To).
	EventStatus EventType = "session.status"
	// EventUpdated: activity, owner or problems changed without a status change.
	EventUpdated EventType = "session.updated"
	// EventAction: a user action (repair, reap, stop, launch, resume) was applied.
	EventAction EventType = "session.action"
)

// Event is one entry of the store's event log. Seq is assigned by the store,
// never repeats and never goes back, also across restarts.
type Event struct {
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
	Type      EventType `json:"type"`
	SessionID string    `json:"session_id"`
	Agent     string    `json:"agent,omitempty"`
	From      Status    `json:"from,omitempty"`
	To        Status    `json:"to,omitempty"`
	Activity  Activity  `json:"activity,omitempty"`
	// WaitingFor is the record's waiting_for after the change.
	WaitingFor *WaitingFor `json:"waiting_for,omitempty"`
	Reason     string      `json:"reason,omitempty"`
	// Problems lists the kinds present after the change.
	Problems []ProblemKind `json:"problems,omitempty"`
	// Origin is who asked for an action (session.action): the session
	// a tool acted for, as its client said (sessionctl mcp sends
	// "session <id>"); empty when the client did not say.
	Origin string `json:"origin,omitempty"`
}
