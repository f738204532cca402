package session

import "time"

// SendState is where a queued prompt stands.
type SendState string

// Send states. A send goes queued -> delivering -> delivered or failed, or
// queued -> cancelled; nothing goes back.
const (
	SendQueued     SendState = "queued"
	SendDelivering SendState = "delivering"
	SendDelivered  SendState = "delivered"
	SendFailed     SendState = "failed"
	SendCancelled  SendState = "cancelled"
)

// Final reports whether nothing more happens to a send in state s.
func (s SendState) Final() bool {
	return s == SendDelivered || s == SendFailed || s == SendCancelled
}

// Send is a prompt `sessionctl send --when-idle` queued for a session:
// kept in the store, delivered once when the session is idle (or resumed
// with it once it stopped), cancellable while queued.
type Send struct {
	ID        string `json:"id"`
	SessionID string `json:"session_id"`
	Prompt    string `json:"prompt"`
	// Mode is how a stopped session is resumed with it: headless or tmux.
	Mode      string    `json:"mode,omitempty"`
	State     SendState `json:"state"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Via says how it was delivered ("tmux pane %3", "OpenCode server …",
	// "resumed"); Error why it failed.
	Via   string `json:"via,omitempty"`
	Error string `json:"error,omitempty"`
}
