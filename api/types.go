// Package api holds sessiond's wire types and a Go client for its local API,
// for sessionctl and for any other local tool.
//
// The API is HTTP/1.1 with JSON over a Unix socket, versioned under /v1.
// openapi.json beside this file documents it for tools in other languages.
package api

import (
	"time"

	"github.com/sessiond/sessiond/session"
)

// Session is a session as the API serves it. The JSON names id, agent,
// upstream_id, status, activity, pid, pid_start, cwd, launched, problems,
// created_at, updated_at, stopped_at, last_activity_at and resume are a
// contract other tools rely on; fields may be added, never renamed.
type Session struct {
	ID             string                 `json:"id"`
	Agent          string                 `json:"agent"`
	UpstreamID     string                 `json:"upstream_id"`
	Status         session.Status         `json:"status"`
	StatusReason   string                 `json:"status_reason,omitempty"`
	Activity       session.Activity       `json:"activity"`
	ActivitySince  *time.Time             `json:"activity_since,omitempty"`
	ActivitySource session.ActivitySource `json:"activity_source,omitempty"`
	WaitingFor     *session.WaitingFor    `json:"waiting_for,omitempty"`
	// PromptAt is when sessiond last delivered a prompt to the session;
	// another waits until the session shows activity after it.
	PromptAt       *time.Time            `json:"prompt_delivered_at,omitempty"`
	PID            int                   `json:"pid"`
	PIDStart       uint64                `json:"pid_start"`
	BootID         string                `json:"boot_id,omitempty"`
	OwnerInferred  bool                  `json:"owner_inferred"`
	OwnerEvidence  string                `json:"owner_evidence,omitempty"`
	CandidatePIDs  []int                 `json:"candidate_pids,omitempty"`
	Cwd            string                `json:"cwd"`
	Title          string                `json:"title,omitempty"`
	Source         string                `json:"source,omitempty"`
	Launched       bool                  `json:"launched"`
	LaunchedAt     *time.Time            `json:"launched_at,omitempty"`
	Mode           string                `json:"mode,omitempty"`
	Tmux           string                `json:"tmux_session,omitempty"`
	Pane           *session.Pane         `json:"tmux_pane,omitempty"`
	LogPath        string                `json:"log_path,omitempty"`
	Exit           *session.ExitStatus   `json:"exit,omitempty"`
	Problems       []session.Problem     `json:"problems"`
	CreatedAt      time.Time             `json:"created_at"`
	UpdatedAt      time.Time             `json:"updated_at"`
	StoppedAt      *time.Time            `json:"stopped_at"`
	LastActivityAt *time.Time            `json:"last_activity_at"`
	Resume         *session.ResumeCursor `json:"resume"`
	// Host is the --host a client found the session on, when it was
	// given hosts (sessionctl --host); sessiond never sends it.
	Host string `json:"host,omitempty"`
}

// FromRecord converts a stored record to its wire form.
func FromRecord(r *session.Record) Session {
	s := Session{
		ID: r.ID, Agent: r.Agent, UpstreamID: r.UpstreamID,
		Status: r.Status, StatusReason: r.StatusReason, Activity: r.Activity,
		ActivitySince: r.ActivitySince, ActivitySource: r.ActivitySource, WaitingFor: r.WaitingFor, PromptAt: r.PromptAt,
		OwnerInferred: r.OwnerInferred, OwnerEvidence: r.OwnerEvidence,
		Cwd: r.Cwd, Title: r.Title, Source: r.Source, Launched: r.Launched,
		LaunchedAt: r.LaunchedAt, Mode: r.Mode, Tmux: r.Tmux, Pane: r.Pane, LogPath: r.LogPath, Exit: r.Exit,
		Problems:  r.Problems,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, StoppedAt: r.StoppedAt,
		LastActivityAt: r.LastActivityAt, Resume: r.Resume,
	}
	if s.Problems == nil {
		s.Problems = []session.Problem{}
	}
	if r.Owner != nil {
		s.PID, s.PIDStart, s.BootID = r.Owner.PID, r.Owner.StartTicks, r.Owner.BootID
	}
	for _, c := range r.Candidates {
		s.CandidatePIDs = append(s.CandidatePIDs, c.PID)
	}
	return s
}

// Problem returns the session's first problem of the kind, or nil.
func (s *Session) Problem(kind session.ProblemKind) *session.Problem {
	for i := range s.Problems {
		if s.Problems[i].Kind == kind {
			return &s.Problems[i]
		}
	}
	return nil
}

// SessionList is the answer of GET /v1/sessions.
type SessionList struct {
	Sessions []Session `json:"sessions"`
}

// Event is an entry of the event log, as GET /v1/events streams it. Seq is
// also the SSE id, so a client resuming with Last-Event-ID misses nothing.
type Event = session.Event

// AdapterHealth is one adapter's last scan: what the tracker's last pass
// learned about it (tracker.Stats), as GET /v1/health serves it.
type AdapterHealth struct {
	Name         string    `json:"name"`
	LastScan     time.Time `json:"last_scan"`
	LastDuration string    `json:"last_duration"`
	Sessions     int       `json:"sessions"`
	// LastError is the error of the last pass ("" when it looked fine);
	// InputErrors names each input that could not be read.
	LastError   string   `json:"last_error,omitempty"`
	InputErrors []string `json:"input_errors,omitempty"`
	// InputWarnings names each input read only in part (corrupt, glued or
	// too long lines, skipped links, unparseable entries); statuses are
	// unaffected.
	InputWarnings []string `json:"input_warnings,omitempty"`
	// Drift is what the adapter's reads did not understand, per version
	// of its agent: the data a newer version wrote, read as far as it is
	// understood. Statuses are unaffected (liveness is the owner's
	// process); activity may be approximate.
	Drift []Drift `json:"drift,omitempty"`
}

// Drift is what an adapter did not understand of one kind, in the data
// one version of its agent wrote: "claude 2.1.340: 2 unknown line types
// (x, y) in 14 transcripts".
type Drift struct {
	// Version is the version the agent wrote into its data ("" when it
	// wrote none: a hook's payload).
	Version string `json:"version"`
	// Kind is line_type, status, waiting_for, hook_event or field_type.
	Kind string `json:"kind"`
	// Input is the sort of input that showed it: transcript, rollout,
	// session, registry entry, hook.
	Input string `json:"input"`
	// Inputs is how many inputs show a value of this kind now (each
	// counted once, however often it is read).
	Inputs int `json:"inputs"`
	// Values are the values not understood, most inputs first.
	Values []DriftValue `json:"values"`
	// Others counts inputs showing values past the bound kept per
	// version.
	Others int `json:"others,omitempty"`
}

// DriftValue is one value not understood and how many inputs show it.
type DriftValue struct {
	Value  string `json:"value"`
	Inputs int    `json:"inputs"`
}

// HookResult answers POST /v1/hooks/{agent}.
type HookResult struct {
	Agent      string              `json:"agent"`
	SessionID  string              `json:"session_id"`
	Event      string              `json:"event"`
	Activity   session.Activity    `json:"activity,omitempty"`
	WaitingFor *session.WaitingFor `json:"waiting_for,omitempty"`
	// Taken: kept as evidence for the next pass (which takes it only
	// from a descendant of the session's live owner).
	Taken bool `json:"taken"`
	// Refused says why a hook that says something of activity was not
	// taken (its caller is unknown, or is a tool of another session).
	Refused string `json:"refused,omitempty"`
}

// Health is the answer of GET /v1/health.
type Health struct {
	// Host is the --host a client asked (sessionctl --host); sessiond
	// never sends it.
	Host      string    `json:"host,omitempty"`
	Version   string    `json:"version"`
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
	Uptime    string    `json:"uptime"`
	StorePath string    `json:"store_path"`
	// StoreRecovered names the file a corrupt store was moved to at start.
	StoreRecovered string          `json:"store_recovered,omitempty"`
	Socket         string          `json:"socket"`
	LastReconcile  time.Time       `json:"last_reconcile"`
	ReconcileTook  string          `json:"reconcile_took"`
	ReconcileError string          `json:"reconcile_error,omitempty"`
	LastEventSeq   uint64          `json:"last_event_seq"`
	Sessions       map[string]int  `json:"sessions"` // by status
	Adapters       []AdapterHealth `json:"adapters"`
	// Reactions is what runs on changes: hooks.d and notifications.
	Reactions *ReactionsHealth `json:"reactions,omitempty"`
}

// ReactionsHealth says what sessiond runs on each change: the
// executables of its hooks directory and the desktop notifications.
type ReactionsHealth struct {
	HooksDir string `json:"hooks_dir"`
	// HooksDirError is why the directory could not be listed ("" when it
	// could, or does not exist).
	HooksDirError string `json:"hooks_dir_error,omitempty"`
	// Notify is "off", the notifier used ("notify-send", "osascript"),
	// or "unavailable: " and why.
	Notify string       `json:"notify"`
	Hooks  []HookHealth `json:"hooks"`
}

// HookHealth is one hook's record since sessiond started. Failing says
// its last run failed; LastError is its latest failure's words.
type HookHealth struct {
	Name string `json:"name"`
	Path string `json:"path,omitempty"`
	// Skipped says why the file is not run (not executable, writable by
	// others); such a hook has no runs.
	Skipped  string `json:"skipped,omitempty"`
	Runs     int64  `json:"runs"`
	Failures int64  `json:"failures"`
	// Dropped counts changes not given to the hook because it was too
	// far behind.
	Dropped     int64      `json:"dropped,omitempty"`
	Failing     bool       `json:"failing"`
	LastRun     *time.Time `json:"last_run,omitempty"`
	LastTook    string     `json:"last_took,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
}

// Error is the body of every error answer.
type Error struct {
	Error string `json:"error"`
	// Code is a stable machine-readable word: not_found, ambiguous,
	// bad_request, forbidden, internal, unavailable.
	Code string `json:"code"`
	// Candidates lists matching ids when Code is "ambiguous".
	Candidates []string `json:"candidates,omitempty"`
}

// Error codes.
const (
	CodeNotFound    = "not_found"
	CodeAmbiguous   = "ambiguous"
	CodeBadRequest  = "bad_request"
	CodeForbidden   = "forbidden"
	CodeInternal    = "internal"
	CodeUnavailable = "unavailable"
	// CodeAlreadyRunning: a resume would make a second writer, or the
	// action needs a dead owner.
	CodeAlreadyRunning = "already_running"
	// CodeNotRunning: stop of a session with no live owner.
	CodeNotRunning = "not_running"
	// CodeOwnerAmbiguous: several live processes could own the session.
	CodeOwnerAmbiguous = "owner_ambiguous"
	// CodeNotRecorded: the action was carried out (the body still holds
	// its steps) but the store refused its event. It differs from
	// "internal" so a client does not take the action for undone and
	// repeat it.
	CodeNotRecorded = "not_recorded"
)
