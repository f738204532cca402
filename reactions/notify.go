package reactions

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/sessiond/sessiond/lib/printable"
	"github.com/sessiond/sessiond/session"
)

// Notifier shows a desktop notification.
type Notifier interface {
	// Name says what shows it ("notify-send").
	Name() string
	Notify(ctx context.Context, summary, body string) error
}

// FindNotifier returns the desktop's notifier found on PATH: notify-send
// (libnotify, Linux desktops) or osascript (macOS).
func FindNotifier() (Notifier, error) {
	if p, err := exec.LookPath("notify-send"); err == nil {
		return &commandNotifier{name: "notify-send", path: p, args: func(summary, body string) []string {
			// The body is markup to most notification daemons: a command's
			// "<" or "&" must show as itself.
			return []string{"--app-name=sessiond", "--", summary, markupEscaper.Replace(body)}
		}}, nil
	}
	if p, err := exec.LookPath("osascript"); err == nil {
		return &commandNotifier{name: "osascript", path: p, args: func(summary, body string) []string {
			return []string{"-e", fmt.Sprintf("display notification %s with title %s", appleString(body), appleString(summary))}
		}}, nil
	}
	return nil, errors.New("neither notify-send nor osascript is on PATH")
}

type commandNotifier struct {
	name, path string
	args       func(summary, body string) []string
}

func (n *commandNotifier) Name() string { return n.name }

func (n *commandNotifier) Notify(ctx context.Context, summary, body string) error {
	// The texts come from agents' files: a NUL would make exec refuse
	// the arguments, and a control character is not for a desktop.
	cmd := exec.CommandContext(ctx, n.path, n.args(printable.Line(summary), printable.Line(body))...)
	// A helper it started that keeps the output open does not hold the
	// worker past the limit.
	cmd.WaitDelay = killAfter
	out, err := cmd.CombinedOutput()
	if err != nil {
		if last := lastLine(string(out)); last != "" {
			return fmt.Errorf("%s: %w: %s", n.name, err, last)
		}
		return fmt.Errorf("%s: %w", n.name, err)
	}
	return nil
}

// markupEscaper escapes the body markup of the freedesktop notification
// specification.
var markupEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// appleString quotes s as an AppleScript string literal.
func appleString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// message is a notification's text.
type message struct{ Summary, Body string }

// notification is the notification c calls for, if any: a session that
// starts waiting for its user (a permission, a question, or its next
// prompt after a turn), is interrupted, or ends.
func notification(c *Change) (message, bool) {
	who := agentName(c.Agent) + " " + label(c)
	was := State{}
	if c.Previous != nil {
		was = *c.Previous
	}
	switch {
	case c.Kind == KindStatus && c.Status == session.StatusInterrupted:
		return message{who + " was interrupted", reasonOr(c.Reason, "its process is gone but its data says it was mid-turn")}, true
	case c.Kind == KindStatus && c.Status == session.StatusStopped && was.Status != "" && !was.Status.Terminal():
		return message{who + " ended", reasonOr(c.Reason, "its process exited")}, true
	case c.Status != session.StatusRunning || c.Kind == KindCreated:
		return message{}, false
	case c.Activity == session.ActivityWaiting && (was.Activity != session.ActivityWaiting || !was.WaitingFor.Equal(c.WaitingFor)):
		return message{who + " needs you", waitingText(c.WaitingFor)}, true
	case c.Activity == session.ActivityIdle && was.Activity == session.ActivityBusy:
		return message{who + " finished its turn", "It waits for your next prompt."}, true
	}
	return message{}, false
}

func reasonOr(reason, otherwise string) string {
	if reason != "" {
		return reason
	}
	return otherwise
}

// waitingText says what a waiting session waits for, in a sentence.
func waitingText(w *session.WaitingFor) string {
	if w == nil {
		return "It waits for you."
	}
	switch w.Kind {
	case session.WaitingPermission:
		s := "Permission to use " + orDefault(w.Tool, "a tool")
		if w.Input != "" {
			s += ": " + w.Input
		}
		return s
	case session.WaitingQuestion:
		return "Question: " + orDefault(w.Question, "(see the session)")
	}
	return "It waits for you: " + orDefault(w.Detail, string(w.Kind))
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func agentName(agent string) string {
	switch agent {
	case "claude":
		return "Claude Code"
	case "opencode":
		return "OpenCode"
	case "codex":
		return "Codex"
	}
	return agent
}

// label names the session for a person: its title, else its folder, with
// its id (12 hex digits) to tell apart sessions of one folder.
func label(c *Change) string {
	id := c.SessionID
	if c.Session != nil {
		if t := printable.Line(c.Session.Title); t != "" {
			if r := []rune(t); len(r) > 60 {
				t = string(r[:60]) + "…"
			}
			return fmt.Sprintf("%q (%s)", t, id)
		}
		if c.Session.Cwd != "" {
			return filepath.Base(c.Session.Cwd) + " (" + id + ")"
		}
	}
	return id
}
