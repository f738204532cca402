package api

import (
	"github.com/sessiond/sessiond/lib/jsonenc"
	"github.com/sessiond/sessiond/session"
)

// AppendJSON appends the session as json.Marshal encodes it, without its
// reflection: the daemon encodes its lists this way. json_test.go holds
// the two to the same bytes over every field.
func (s *Session) AppendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, '{')
	b = jsonenc.Key(b, "id")
	b = jsonenc.String(b, s.ID)
	b = jsonenc.Key(b, "agent")
	b = jsonenc.String(b, s.Agent)
	b = jsonenc.Key(b, "upstream_id")
	b = jsonenc.String(b, s.UpstreamID)
	b = jsonenc.Key(b, "status")
	b = jsonenc.String(b, string(s.Status))
	b = jsonenc.OptString(b, "status_reason", s.StatusReason)
	b = jsonenc.Key(b, "activity")
	b = jsonenc.String(b, string(s.Activity))
	if b, err = jsonenc.OptTime(b, "activity_since", s.ActivitySince); err != nil {
		return nil, err
	}
	b = jsonenc.OptString(b, "activity_source", string(s.ActivitySource))
	if s.WaitingFor != nil {
		b = jsonenc.Key(b, "waiting_for")
		b = s.WaitingFor.AppendJSON(b)
	}
	if b, err = jsonenc.OptTime(b, "prompt_delivered_at", s.PromptAt); err != nil {
		return nil, err
	}
	b = jsonenc.Key(b, "pid")
	b = jsonenc.Int(b, s.PID)
	b = jsonenc.Key(b, "pid_start")
	b = jsonenc.Uint(b, s.PIDStart)
	b = jsonenc.OptString(b, "boot_id", s.BootID)
	b = jsonenc.Key(b, "owner_inferred")
	b = jsonenc.Bool(b, s.OwnerInferred)
	b = jsonenc.OptString(b, "owner_evidence", s.OwnerEvidence)
	if len(s.CandidatePIDs) > 0 {
		b = jsonenc.Key(b, "candidate_pids")
		b = append(b, '[')
		for i, pid := range s.CandidatePIDs {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonenc.Int(b, pid)
		}
		b = append(b, ']')
	}
	b = jsonenc.Key(b, "cwd")
	b = jsonenc.String(b, s.Cwd)
	b = jsonenc.OptString(b, "title", s.Title)
	b = jsonenc.OptString(b, "source", s.Source)
	b = jsonenc.Key(b, "launched")
	b = jsonenc.Bool(b, s.Launched)
	if b, err = jsonenc.OptTime(b, "launched_at", s.LaunchedAt); err != nil {
		return nil, err
	}
	b = jsonenc.OptString(b, "mode", s.Mode)
	b = jsonenc.OptString(b, "tmux_session", s.Tmux)
	if s.Pane != nil {
		b = jsonenc.Key(b, "tmux_pane")
		b = s.Pane.AppendJSON(b)
	}
	b = jsonenc.OptString(b, "log_path", s.LogPath)
	if s.Exit != nil {
		b = jsonenc.Key(b, "exit")
		if b, err = s.Exit.AppendJSON(b); err != nil {
			return nil, err
		}
	}
	b = jsonenc.Key(b, "problems")
	if b, err = session.AppendProblems(b, s.Problems); err != nil {
		return nil, err
	}
	b = jsonenc.Key(b, "created_at")
	if b, err = jsonenc.Time(b, s.CreatedAt); err != nil {
		return nil, err
	}
	b = jsonenc.Key(b, "updated_at")
	if b, err = jsonenc.Time(b, s.UpdatedAt); err != nil {
		return nil, err
	}
	b = jsonenc.Key(b, "stopped_at")
	if b, err = session.AppendTimePtr(b, s.StoppedAt); err != nil {
		return nil, err
	}
	b = jsonenc.Key(b, "last_activity_at")
	if b, err = session.AppendTimePtr(b, s.LastActivityAt); err != nil {
		return nil, err
	}
	b = jsonenc.Key(b, "resume")
	b = s.Resume.AppendJSON(b)
	b = jsonenc.OptString(b, "host", s.Host)
	return append(b, '}'), nil
}
