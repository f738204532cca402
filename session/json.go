package session

import (
	"time"

	"github.com/sessiond/sessiond/lib/jsonenc"
	"github.com/sessiond/sessiond/proc"
)

// AppendJSON appends the record as json.Marshal encodes it, without its
// reflection: the store writes every record it commits this way.
// json_test.go holds the two to the same bytes over every field, so a
// field added to Record and not here fails that test.
func (r *Record) AppendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, '{')
	b = jsonenc.Key(b, "v")
	b = jsonenc.Int(b, r.V)
	b = jsonenc.Key(b, "id")
	b = jsonenc.String(b, r.ID)
	b = jsonenc.Key(b, "agent")
	b = jsonenc.String(b, r.Agent)
	b = jsonenc.Key(b, "upstream_id")
	b = jsonenc.String(b, r.UpstreamID)
	b = jsonenc.Key(b, "status")
	b = jsonenc.String(b, string(r.Status))
	b = jsonenc.Key(b, "activity")
	b = jsonenc.String(b, string(r.Activity))
	b = jsonenc.OptString(b, "status_reason", r.StatusReason)
	if b, err = jsonenc.OptTime(b, "activity_since", r.ActivitySince); err != nil {
		return nil, err
	}
	b = jsonenc.OptString(b, "activity_source", string(r.ActivitySource))
	if r.WaitingFor != nil {
		b = jsonenc.Key(b, "waiting_for")
		b = r.WaitingFor.AppendJSON(b)
	}
	if b, err = jsonenc.OptTime(b, "prompt_delivered_at", r.PromptAt); err != nil {
		return nil, err
	}
	if r.Owner != nil {
		b = jsonenc.Key(b, "owner")
		b = appendIdentity(b, r.Owner)
	}
	if r.OwnerInferred {
		b = jsonenc.Key(b, "owner_inferred")
		b = jsonenc.Bool(b, true)
	}
	b = jsonenc.OptString(b, "owner_evidence", r.OwnerEvidence)
	if len(r.Candidates) > 0 {
		b = jsonenc.Key(b, "candidates")
		b = append(b, '[')
		for i := range r.Candidates {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendIdentity(b, &r.Candidates[i])
		}
		b = append(b, ']')
	}
	b = jsonenc.Key(b, "cwd")
	b = jsonenc.String(b, r.Cwd)
	b = jsonenc.OptString(b, "title", r.Title)
	b = jsonenc.Key(b, "launched")
	b = jsonenc.Bool(b, r.Launched)
	if b, err = jsonenc.OptTime(b, "launched_at", r.LaunchedAt); err != nil {
		return nil, err
	}
	b = jsonenc.OptString(b, "mode", r.Mode)
	b = jsonenc.OptString(b, "tmux_session", r.Tmux)
	if r.Pane != nil {
		b = jsonenc.Key(b, "tmux_pane")
		b = r.Pane.AppendJSON(b)
	}
	b = jsonenc.OptString(b, "log_path", r.LogPath)
	if r.Exit != nil {
		b = jsonenc.Key(b, "exit")
		if b, err = r.Exit.AppendJSON(b); err != nil {
			return nil, err
		}
	}
	b = jsonenc.OptString(b, "source", r.Source)
	b = jsonenc.Key(b, "problems")
	if b, err = AppendProblems(b, r.Problems); err != nil {
		return nil, err
	}
	b = jsonenc.Key(b, "created_at")
	if b, err = jsonenc.Time(b, r.CreatedAt); err != nil {
		return nil, err
	}
	b = jsonenc.Key(b, "updated_at")
	if b, err = jsonenc.Time(b, r.UpdatedAt); err != nil {
		return nil, err
	}
	b = jsonenc.Key(b, "stopped_at")
	if b, err = AppendTimePtr(b, r.StoppedAt); err != nil {
		return nil, err
	}
	b = jsonenc.Key(b, "last_activity_at")
	if b, err = AppendTimePtr(b, r.LastActivityAt); err != nil {
		return nil, err
	}
	if b, err = jsonenc.OptTime(b, "last_seen_at", r.LastSeenAt); err != nil {
		return nil, err
	}
	b = jsonenc.Key(b, "resume")
	b = r.Resume.AppendJSON(b)
	return append(b, '}'), nil
}

// AppendJSON appends the event as json.Marshal encodes it.
func (e *Event) AppendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, '{')
	b = jsonenc.Key(b, "seq")
	b = jsonenc.Uint(b, e.Seq)
	b = jsonenc.Key(b, "time")
	if b, err = jsonenc.Time(b, e.Time); err != nil {
		return nil, err
	}
	b = jsonenc.Key(b, "type")
	b = jsonenc.String(b, string(e.Type))
	b = jsonenc.Key(b, "session_id")
	b = jsonenc.String(b, e.SessionID)
	b = jsonenc.OptString(b, "agent", e.Agent)
	b = jsonenc.OptString(b, "from", string(e.From))
	b = jsonenc.OptString(b, "to", string(e.To))
	b = jsonenc.OptString(b, "activity", string(e.Activity))
	if e.WaitingFor != nil {
		b = jsonenc.Key(b, "waiting_for")
		b = e.WaitingFor.AppendJSON(b)
	}
	b = jsonenc.OptString(b, "reason", e.Reason)
	if len(e.Problems) > 0 {
		b = jsonenc.Key(b, "problems")
		b = append(b, '[')
		for i, k := range e.Problems {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonenc.String(b, string(k))
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

// AppendJSON appends w as json.Marshal encodes it.
func (w *WaitingFor) AppendJSON(b []byte) []byte {
	b = append(b, '{')
	b = jsonenc.Key(b, "kind")
	b = jsonenc.String(b, string(w.Kind))
	b = jsonenc.OptString(b, "tool", w.Tool)
	b = jsonenc.OptString(b, "input", w.Input)
	b = jsonenc.OptString(b, "question", w.Question)
	b = jsonenc.OptString(b, "detail", w.Detail)
	return append(b, '}')
}

// AppendJSON appends p as json.Marshal encodes it.
func (p *Pane) AppendJSON(b []byte) []byte {
	b = append(b, '{')
	b = jsonenc.Key(b, "socket")
	b = jsonenc.String(b, p.Socket)
	b = jsonenc.Key(b, "id")
	b = jsonenc.String(b, p.ID)
	return append(b, '}')
}

// AppendJSON appends x as json.Marshal encodes it.
func (x *ExitStatus) AppendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, '{')
	b = jsonenc.Key(b, "pid")
	b = jsonenc.Int(b, x.PID)
	b = jsonenc.Key(b, "code")
	b = jsonenc.Int(b, x.Code)
	b = jsonenc.OptString(b, "signal", x.Signal)
	b = jsonenc.Key(b, "at")
	if b, err = jsonenc.Time(b, x.At); err != nil {
		return nil, err
	}
	b = jsonenc.OptString(b, "log_tail", x.LogTail)
	return append(b, '}'), nil
}

// AppendJSON appends c as json.Marshal encodes it (null when nil).
func (c *ResumeCursor) AppendJSON(b []byte) []byte {
	if c == nil {
		return append(b, "null"...)
	}
	b = append(b, '{')
	b = jsonenc.Key(b, "schema_version")
	b = jsonenc.Int(b, c.SchemaVersion)
	b = jsonenc.Key(b, "agent")
	b = jsonenc.String(b, c.Agent)
	b = jsonenc.Key(b, "upstream_id")
	b = jsonenc.String(b, c.UpstreamID)
	b = jsonenc.Key(b, "cwd")
	b = jsonenc.String(b, c.Cwd)
	b = jsonenc.Key(b, "root")
	b = jsonenc.String(b, c.Root)
	return append(b, '}')
}

// AppendProblems appends ps as json.Marshal encodes the slice (null when
// nil).
func AppendProblems(b []byte, ps []Problem) ([]byte, error) {
	if ps == nil {
		return append(b, "null"...), nil
	}
	var err error
	b = append(b, '[')
	for i := range ps {
		p := &ps[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = jsonenc.Key(b, "kind")
		b = jsonenc.String(b, string(p.Kind))
		b = jsonenc.Key(b, "detail")
		b = jsonenc.String(b, p.Detail)
		b = jsonenc.Key(b, "since")
		if b, err = jsonenc.Time(b, p.Since); err != nil {
			return nil, err
		}
		b = jsonenc.OptString(b, "key", p.Key)
		b = append(b, '}')
	}
	return append(b, ']'), nil
}

// AppendTimePtr appends *t, or null when t is nil.
func AppendTimePtr(b []byte, t *time.Time) ([]byte, error) {
	if t == nil {
		return append(b, "null"...), nil
	}
	return jsonenc.Time(b, *t)
}

func appendIdentity(b []byte, id *proc.Identity) []byte {
	b = append(b, '{')
	b = jsonenc.Key(b, "boot_id")
	b = jsonenc.String(b, id.BootID)
	b = jsonenc.Key(b, "pid")
	b = jsonenc.Int(b, id.PID)
	b = jsonenc.Key(b, "start_ticks")
	b = jsonenc.Uint(b, id.StartTicks)
	return append(b, '}')
}
