package gemini

import (
	"fmt"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/session"
)

// turnState is what a chat's last message says of the turn.
type turnState struct {
	Activity   session.Activity
	Evidence   string
	WaitingFor *session.WaitingFor
	InFlight   []adapters.Issue
}

// turn reads the turn state from the last message. Gemini CLI 0.61.0
// (docs/agents/gemini.md) writes, for a turn: the prompt (a user message),
// each model answer as a gemini message as soon as it streamed (its text;
// the function calls it made are not in it), the calls into that gemini
// message once they finished (with their final status), then their results
// as a user message of functionResponse parts, and the next answer. So:
//
//   - no message but the <session_context> one: no prompt yet, idle;
//   - a user message (a prompt, or tool results): the model's answer is not
//     written yet, busy (an incomplete_message once the owner is dead);
//   - a gemini message without text or calls: the model answered with
//     calls only, which run or await approval (the data cannot tell
//     which), busy (an orphaned_tool_call once the owner is dead);
//   - a gemini message with a call not done (a status other than success,
//     error, cancelled, as older versions wrote): busy, or waiting for
//     permission when it is awaiting_approval;
//   - a gemini message whose calls are all done: their results are being
//     sent, busy; unless all were cancelled (the user stopped the turn);
//   - a gemini message with text and no call, or an info, error or warning
//     message: the turn ended, idle.
func (c *chat) turn() turnState {
	idle := turnState{Activity: session.ActivityIdle, Evidence: "chat tail: the turn ended"}
	var m message
	for i := len(c.Msgs) - 1; i >= 0; i-- {
		if c.Msgs[i].Type != typeContext {
			m = c.Msgs[i]
			break
		}
	}
	switch m.Type {
	case "":
		idle.Evidence = "chat: no prompt yet"
		return idle
	case "user":
		what, ev := "prompt", "chat tail: a prompt without its answer"
		if !m.Text {
			what, ev = "tool results", "chat tail: tool results without the model's answer"
		}
		return turnState{Activity: session.ActivityBusy, Evidence: ev,
			InFlight: []adapters.Issue{{Kind: session.ProblemIncompleteMessage, Key: m.ID, Since: m.At,
				Detail: fmt.Sprintf("%s %s never got an answer", what, m.ID)}}}
	case "gemini":
	default:
		return idle
	}
	if len(m.Calls) == 0 {
		if m.Text {
			return idle
		}
		return turnState{Activity: session.ActivityBusy, Evidence: "chat tail: the model's tool calls have not finished",
			InFlight: []adapters.Issue{{Kind: session.ProblemOrphanedToolCall, Key: m.ID, Since: m.At,
				Detail: fmt.Sprintf("the tool calls of message %s never finished (Gemini CLI records a call once it is done)", m.ID)}}}
	}
	var pending []call
	allCancelled := true
	for _, tc := range m.Calls {
		if !done(tc.Status) {
			pending = append(pending, tc)
		}
		if tc.Status != statusCancelled {
			allCancelled = false
		}
	}
	for _, tc := range pending {
		if tc.Status == statusApproval {
			return turnState{Activity: session.ActivityWaiting, Evidence: "chat tail: a tool call awaits approval",
				WaitingFor: &session.WaitingFor{Kind: session.WaitingPermission, Tool: tc.Name, Input: tc.Args},
				InFlight:   orphans(pending)}
		}
	}
	if len(pending) > 0 {
		return turnState{Activity: session.ActivityBusy, Evidence: "chat tail: a tool call runs", InFlight: orphans(pending)}
	}
	if allCancelled {
		return idle
	}
	return turnState{Activity: session.ActivityBusy, Evidence: "chat tail: tool results without the model's answer",
		InFlight: []adapters.Issue{{Kind: session.ProblemIncompleteMessage, Key: m.ID, Since: lastCallAt(m),
			Detail: fmt.Sprintf("the results of %d tool calls of message %s never got an answer", len(m.Calls), m.ID)}}}
}

func orphans(pending []call) []adapters.Issue {
	var out []adapters.Issue
	for _, tc := range pending {
		d := fmt.Sprintf("%s call %s (%s) without its result", tc.Name, tc.ID, tc.Status)
		if tc.Args != "" {
			d += ": " + tc.Args
		}
		out = append(out, adapters.Issue{Kind: session.ProblemOrphanedToolCall, Key: tc.ID, Since: tc.At, Detail: d})
	}
	return out
}

func lastCallAt(m message) time.Time {
	t := m.At
	for _, c := range m.Calls {
		if c.At.After(t) {
			t = c.At
		}
	}
	return t
}
