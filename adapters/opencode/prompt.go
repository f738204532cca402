package opencode

import (
	"context"
	"fmt"
	"net/url"

	"github.com/sessiond/sessiond/adapters"
)

// Prompt hands text to an idle session through a server that has it:
// POST /session/:id/prompt_async (1.18.33: 204 at once, the turn runs in
// the server). ok is false when no reachable server has the session (a
// plain TUI opens no port): the caller types into its pane instead.
func (a *Adapter) Prompt(ctx context.Context, t adapters.RepairTarget, text string) (string, bool, error) {
	id := t.UpstreamID
	if !validID(id) {
		return "", false, nil
	}
	sv, err := a.serverFor(ctx, id, t.Cwd)
	if err != nil {
		return "", false, fmt.Errorf("find the OpenCode server of %s: %w", id, err)
	}
	if sv == nil {
		return "", false, nil
	}
	body := map[string]any{"parts": []map[string]string{{"type": "text", "text": text}}}
	if err := a.do(ctx, "POST", sv.url, "/session/"+url.PathEscape(id)+"/prompt_async", t.Cwd, body, nil); err != nil {
		return "", true, fmt.Errorf("POST /session/%s/prompt_async on %s: %w", id, sv.url, err)
	}
	return "OpenCode server " + sv.url, true, nil
}
