package claude

import (
	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/hookjson"
)

// Claude Code's command hooks (settings.json "hooks"): AskUserQuestion's
// call is a question put to the user, shown as the call starts.
var hooks = hookjson.Agent{QuestionTools: []string{"AskUserQuestion"}}

// ReadHook reads one payload of `sessionctl hook claude`.
func (a *Adapter) ReadHook(payload []byte) (adapters.Hook, error) { return hooks.Read(payload) }
