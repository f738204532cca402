package api

import (
	"context"
	"net/url"

	"github.com/sessiond/sessiond/session"
)

// Error codes of a send.
const (
	// CodeBusy: the session is busy or waiting; send with when_idle to
	// queue the prompt.
	CodeBusy = "busy"
	// CodeCannotType: the session is idle but sessiond has no way to hand
	// it a prompt (not in a tmux pane, no server of its agent).
	CodeCannotType = "cannot_type"
	// CodeNotHeld: right before typing (or handing it to the agent's
	// server), the session's agent was not where the prompt would go: it
	// had exited, was suspended, or another program had its pane's
	// terminal. Nothing was sent; with when_idle the prompt is queued.
	CodeNotHeld = "not_held"
	// CodeNotQueued: the send asked to cancel is no longer queued.
	CodeNotQueued = "not_queued"
)

// SendRequest is the body of POST /v1/sessions/{id}/send.
type SendRequest struct {
	Prompt string `json:"prompt"`
	// WhenIdle queues the prompt when the session is busy or waiting:
	// delivered once when it is idle (or resumed with it once stopped).
	WhenIdle bool `json:"when_idle,omitempty"`
	// Mode is how a stopped session is resumed with the prompt:
	// "headless" (default) or "tmux".
	Mode string `json:"mode,omitempty"`
}

// SendResponse says what became of a prompt: delivered (how, in Via), or
// queued (Queued).
type SendResponse struct {
	Delivered bool          `json:"delivered"`
	Via       string        `json:"via,omitempty"`
	Queued    *session.Send `json:"queued,omitempty"`
	Session   Session       `json:"session"`
}

// Send hands a prompt to session ref.
func (c *Client) Send(ctx context.Context, ref string, req SendRequest) (*SendResponse, error) {
	var r SendResponse
	return &r, c.do(ctx, "POST", "/v1/sessions/"+url.PathEscape(ref)+"/send", req, &r)
}

// Sends lists the queued sends (all: the finished ones too), of session
// ref only when ref is not "".
func (c *Client) Sends(ctx context.Context, ref string, all bool) ([]session.Send, error) {
	q := url.Values{}
	if ref != "" {
		q.Set("session", ref)
	}
	if all {
		q.Set("all", "true")
	}
	var out []session.Send
	path := "/v1/sends"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return out, c.do(ctx, "GET", path, nil, &out)
}

// CancelSend cancels a queued send.
func (c *Client) CancelSend(ctx context.Context, id string) (*session.Send, error) {
	var x session.Send
	return &x, c.do(ctx, "DELETE", "/v1/sends/"+url.PathEscape(id), nil, &x)
}
