package api

import (
	"context"
	"net/url"

	"github.com/sessiond/sessiond/session"
)

// ActionRequest is the body of POST /v1/sessions/{id}/repair, /abort,
// /reap and /stop.
type ActionRequest struct {
	// Apply carries out a repair or reap; without it they are a dry run
	// that returns the plan. Abort and stop always act.
	Apply bool `json:"apply,omitempty"`
	// Timeout is how long stop and reap wait after SIGTERM before SIGKILL
	// (a Go duration, default 10s, at most 25s).
	Timeout string `json:"timeout,omitempty"`
	// Force sends SIGKILL at once (stop, reap).
	Force bool `json:"force,omitempty"`
}

// Step is one checklist item of an action.
type Step = session.Step

// ActionResult answers an action: each step with its target and outcome.
type ActionResult struct {
	Action  string  `json:"action"`
	Applied bool    `json:"applied"`
	Steps   []Step  `json:"steps"`
	Summary string  `json:"summary"`
	Session Session `json:"session"`
}

// Action runs one of repair, abort, reap, stop on a session.
func (c *Client) Action(ctx context.Context, ref, action string, req ActionRequest) (*ActionResult, error) {
	var r ActionResult
	return &r, c.do(ctx, "POST", "/v1/sessions/"+url.PathEscape(ref)+"/"+action, req, &r)
}
