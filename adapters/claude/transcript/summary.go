package transcript

import (
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/kit"
)

// The turn-state summary: what the lines of a transcript, applied in file
// order, say of its session. No I/O here; the reads (transcript.go) hand
// it the lines.

// TurnState is where the last turn of a transcript stands.
type TurnState int

const (
	TurnNone        TurnState = iota // no turn seen yet
	TurnPrompt                       // a real prompt, no reply yet
	TurnToolResult                   // tool results sent, no assistant reply yet
	TurnAssistant                    // the assistant wrote last
	TurnInterrupted                  // the user interrupted the turn
)

// Summary is what a transcript shows, kept per file and updated as the
// file grows. Only the last turn's state is kept: work left unfinished in
// an earlier turn was abandoned when the next prompt came.
type Summary struct {
	SessionID string
	Cwd       string
	Version   string
	GitBranch string
	Title     string
	First     time.Time
	Last      time.Time
	// Pending are tool calls of the last turn that have no result yet,
	// the newest MaxPending of them.
	Pending []ToolCall
	// PendingDropped counts older calls without results that did not fit.
	PendingDropped int
	// Prompt is the last turn's prompt while it has no reply.
	Prompt *Line

	// CustomTitle: Title is one the user chose (a custom-title line).
	CustomTitle bool
	// State is where the last turn stands, since the line at StateAt
	// whose uuid is StateUUID; StopReason is the last assistant line's.
	State      TurnState
	StateAt    time.Time
	StateUUID  string
	StopReason string

	// HeadDrift and TurnDrift are what the lines the summary rests on
	// showed that sessiond does not understand (unknown line types, fields
	// of another type): the head's lines (up to the one that told the
	// head everything) and the last turn's (from its prompt on). Scoped
	// so, an append read and a listing of the whole file say the same.
	HeadDrift, TurnDrift kit.Seen
}

// Drift is what the summary's lines showed that sessiond does not
// understand: the head's and the last turn's.
func (s *Summary) Drift() kit.Seen {
	if s.HeadDrift.Empty() {
		return s.TurnDrift
	}
	out := s.HeadDrift
	out.Union(s.TurnDrift)
	return out
}

// applyHead takes the metadata of one line the head reads.
func (s *Summary) applyHead(ls []Line) {
	head := !s.headDone()
	for i := range ls {
		s.meta(&ls[i])
		if head {
			noteDrift(&s.HeadDrift, &ls[i])
		}
	}
}

// apply takes one line read in file order into the metadata and the turn
// state: a line that starts a turn starts TurnDrift over.
func (s *Summary) apply(ls []Line) {
	head := !s.headDone()
	if isTurnStart(ls) {
		s.TurnDrift = kit.Seen{}
	}
	for i := range ls {
		l := &ls[i]
		s.meta(l)
		s.turn(l)
		if l.unknownType || l.BadField != "" {
			noteDrift(&s.TurnDrift, l)
			if head {
				noteDrift(&s.HeadDrift, l)
			}
		}
	}
}

func noteDrift(seen *kit.Seen, l *Line) {
	if l.unknownType {
		seen.Add(adapters.DriftLineType, l.Type)
	}
	if l.BadField != "" {
		seen.Add(adapters.DriftFieldType, l.BadField)
	}
}

// headDone reports whether the head of a file has told everything the head
// is read for.
func (s *Summary) headDone() bool {
	return s.SessionID != "" && s.Cwd != "" && s.Title != "" && !s.First.IsZero()
}

// meta takes a line's metadata. Applied in file order: the latest version
// and branch win, the first cwd and prompt stay.
func (s *Summary) meta(l *Line) {
	if s.SessionID == "" {
		s.SessionID = l.SessionID
	}
	if s.Cwd == "" {
		s.Cwd = l.Cwd
	}
	if l.Version != "" {
		s.Version = l.Version
	}
	if l.GitBranch != "" {
		s.GitBranch = l.GitBranch
	}
	if !l.Time.IsZero() {
		if s.First.IsZero() || l.Time.Before(s.First) {
			s.First = l.Time
		}
		if l.Time.After(s.Last) {
			s.Last = l.Time
		}
	}
	if l.Title != "" {
		s.Title = l.Title
		s.CustomTitle = true
	}
	if l.Kind == KindPrompt && !l.Sidechain && s.Title == "" {
		s.Title = Shorten(l.Prompt, TitleMax)
	}
}

// turn moves the last turn's state by one line, in file order.
func (s *Summary) turn(l *Line) {
	if l.Sidechain {
		return
	}
	switch l.Kind {
	case KindPrompt:
		s.Pending, s.PendingDropped = nil, 0
		p := *l
		p.Prompt = Shorten(l.Prompt, InputMax)
		p.ToolUses, p.ToolResults = nil, nil
		s.Prompt = &p
		s.set(TurnPrompt, l)
	case KindToolResult:
		for _, id := range l.ToolResults {
			s.resolve(id)
		}
		s.Prompt = nil
		s.set(TurnToolResult, l)
	case KindInterrupt:
		s.Pending, s.PendingDropped = nil, 0
		s.Prompt = nil
		s.set(TurnInterrupted, l)
	case KindAssistant:
		for _, tc := range l.ToolUses {
			s.resolve(tc.ID) // one call written twice counts once
			if len(s.Pending) == MaxPending {
				// Keep the newest: drop the oldest, and count it.
				s.Pending = append(s.Pending[:0], s.Pending[1:]...)
				s.PendingDropped++
			}
			s.Pending = append(s.Pending, tc)
		}
		s.Prompt = nil
		s.StopReason = l.StopReason
		s.set(TurnAssistant, l)
	}
}

// MaxPending bounds the tool calls remembered per session.
const MaxPending = 64

func (s *Summary) set(st TurnState, l *Line) {
	s.State = st
	s.StateAt = l.Time
	s.StateUUID = l.UUID
}

func (s *Summary) resolve(id string) {
	for i, tc := range s.Pending {
		if tc.ID == id {
			s.Pending = append(s.Pending[:i:i], s.Pending[i+1:]...)
			return
		}
	}
}

// ResetTurn forgets the turn state (before a tail is read again).
func (s *Summary) ResetTurn() {
	s.Pending, s.PendingDropped = nil, 0
	s.Prompt = nil
	s.State = TurnNone
	s.StateAt = time.Time{}
	s.StateUUID = ""
	s.StopReason = ""
	s.TurnDrift = kit.Seen{}
}

// isTurnStart reports whether a line's records start a turn: a real
// prompt, not a subagent's.
func isTurnStart(ls []Line) bool {
	for _, l := range ls {
		if l.Kind == KindPrompt && !l.Sidechain {
			return true
		}
	}
	return false
}
