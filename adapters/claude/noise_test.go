package claude

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/session"
)

// A turn with dozens of calls that never got results used to list up to
// 64 orphaned_tool_call problems. The newest few are named; one problem
// counts the rest.
func TestManyUnansweredToolCallsNamedNewestFirst(t *testing.T) {
	for _, n := range []int{3, 5, 6, 70} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			r, cwd := newRoot(t)
			id := claudetest.NewSessionID()
			tr := claudetest.NewTranscript(id, cwd, time.Now().Add(-time.Hour))
			tr.User("run them all")
			var ids []string
			for i := 0; i < n; i++ {
				tid := claudetest.ToolID()
				ids = append(ids, tid)
				tr.AssistantToolUse(tid, "Bash", map[string]any{"command": fmt.Sprintf("job-%d", i)})
			}
			r.WriteTranscript(t, tr)
			o := mustFind(t, discover(t, newTestAdapter(t, &testFS{}, r.Dir), nil), id)
			var named []string
			var more string
			for _, is := range o.InFlight {
				if is.Kind != session.ProblemOrphanedToolCall {
					continue
				}
				if is.Key == "more" {
					more = is.Detail
					continue
				}
				named = append(named, is.Key)
			}
			wantNamed := ids[max(0, n-maxNamedToolCalls):]
			if strings.Join(named, ",") != strings.Join(wantNamed, ",") {
				t.Fatalf("named %v, want the newest %v", named, wantNamed)
			}
			switch {
			case n <= maxNamedToolCalls && more != "":
				t.Fatalf("%d calls: counted %q", n, more)
			case n > maxNamedToolCalls && !strings.HasPrefix(more, fmt.Sprintf("%d more tool calls", n-maxNamedToolCalls)):
				t.Fatalf("%d calls: the rest counted as %q", n, more)
			}
		})
	}
}
