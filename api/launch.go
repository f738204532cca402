package api

import (
	"context"
	"net/url"
)

// LaunchRequest is the body of POST /v1/sessions.
type LaunchRequest struct {
	Agent  string `json:"agent"`
	Cwd    string `json:"cwd"`
	Prompt string `json:"prompt,omitempty"`
	// Args are extra agent arguments, appended as given.
	Args []string `json:"args,omitempty"`
	// Mode is "headless" (default) or "tmux".
	Mode string            `json:"mode,omitempty"`
	Env  map[string]string `json:"env,omitempty"`
}

// LaunchResponse answers POST /v1/sessions and /resume.
type LaunchResponse struct {
	Session Session `json:"session"`
	// Attach is the command that shows a tmux session.
	Attach string `json:"attach,omitempty"`
	// LogPath is where the agent's output goes.
	LogPath string `json:"log_path,omitempty"`
	// Fresh is true when a resume started a new upstream session because
	// the old one is confirmed gone; Reason says why.
	Fresh  bool   `json:"fresh"`
	Forked bool   `json:"forked"`
	Reason string `json:"reason,omitempty"`
}

// ResumeRequest is the body of POST /v1/sessions/{id}/resume.
type ResumeRequest struct {
	Prompt string `json:"prompt,omitempty"`
	// Cwd, when it differs from the recorded one, forks the session with
	// its history into that directory.
	Cwd  string `json:"cwd,omitempty"`
	Mode string `json:"mode,omitempty"`
	// Fork starts a new upstream session with the old one's history, even
	// while the old one runs.
	Fork bool `json:"fork,omitempty"`
	// Args are extra agent arguments, appended as given, as for a launch
	// (a headless Claude run as root needs --allowedTools again).
	Args []string `json:"args,omitempty"`
}

// Launch starts a new agent session.
func (c *Client) Launch(ctx context.Context, req LaunchRequest) (*LaunchResponse, error) {
	var r LaunchResponse
	return &r, c.do(ctx, "POST", "/v1/sessions", req, &r)
}

// Resume continues a session's upstream conversation.
func (c *Client) Resume(ctx context.Context, ref string, req ResumeRequest) (*LaunchResponse, error) {
	var r LaunchResponse
	return &r, c.do(ctx, "POST", "/v1/sessions/"+url.PathEscape(ref)+"/resume", req, &r)
}
