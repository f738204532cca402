package gemini

import (
	"fmt"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/lineage"
	"github.com/sessiond/sessiond/proc"
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
//   - no message but the <session_context> one: no prompt yet, idle (or,
//     when older messages were dropped, a rewind went past those kept:
//     the turn ended);
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
		if !c.Dropped {
			idle.Evidence = "chat: no prompt yet"
		} // else a rewind went past the kept messages: between turns
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

// toolsRunning corrects what the chat cannot say: when the model answered
// with text and calls, Gemini CLI 0.61.0 writes the text at once and the
// calls only once they finished, so while they run the chat reads like a
// finished turn. Its shell tool runs as a child of the gemini in a
// session of its own (setsid'd bash), and lives only while the call runs:
// a session the chat calls idle whose live owner has such a child is
// busy. An owner of several sessions counts only for the one it wrote
// last. The process tree never makes a session idle or in flight.
//
// The tool's start is data too (ActivityAt): it starts once the user
// approved the call, after the Notification hook that said the session
// waits for that approval, and nothing else is written before the call
// ends. So a hook older than the tool's start says no more than the
// tool does (hooks are evidence only while newer than the data).
func toolsRunning(obs []adapters.Observed, snap *proc.Snapshot, started func(proc.Identity) (time.Time, error)) {
	if snap == nil {
		return
	}
	latest := map[proc.Identity]int{}
	for i := range obs {
		for _, o := range obs[i].Owners {
			if j, ok := latest[o.Identity]; !ok || obs[i].LastActivity.After(obs[j].LastActivity) {
				latest[o.Identity] = i
			}
		}
	}
	for i := range obs {
		o := &obs[i]
		if o.Activity != session.ActivityIdle && o.Activity != session.ActivityBusy {
			continue
		}
		for _, ow := range o.Owners {
			if latest[ow.Identity] != i || !lineage.Live(snap, ow.Identity) {
				continue
			}
			t := toolChild(snap, ow.Identity.PID)
			if t == nil {
				continue
			}
			if o.Activity == session.ActivityIdle {
				o.Activity = session.ActivityBusy
				o.ActivityEvidence = fmt.Sprintf("process tree: tool pid %d runs below gemini pid %d (the chat shows calls once done)", t.Identity.PID, ow.Identity.PID)
				o.ActivitySource = session.SourceTranscript
			}
			if at, err := started(t.Identity); err == nil && at.After(o.LastActivity) && at.After(o.ActivityAt) {
				o.ActivityAt = at
			}
			break
		}
	}
}

// toolChild is a live child of pid leading a session of its own that is
// no gemini: a tool running.
func toolChild(snap *proc.Snapshot, pid int) *proc.Process {
	for _, c := range snap.Children(pid) {
		if c.Exited() || c.SID != c.Identity.PID {
			continue
		}
		if _, ok := isGeminiArgv(c.Argv); !ok {
			return c
		}
	}
	return nil
}
