package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/lib/shell"
)

func newAttach(a *app) *cobra.Command {
	var printOnly bool
	cmd := &cobra.Command{
		Use:   "attach ID",
		Short: "Take this terminal to the tmux pane a session runs in",
		Long: `attach shows the tmux pane a running session's agent is in: inside tmux on
the same server it switches this client to the pane (switch-client), outside
tmux it attaches this terminal to it (attach-session). The pane is the one
the agent's process was started in (its TMUX and TMUX_PANE), whoever started
it; for a session sessiond launched with --tmux, its tmux session.

--print prints the tmux command instead of running it (--json: as an argv).`,
		Example: `  sessionctl attach 3ab8
  sessionctl attach 3ab8 --print`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("attach takes one session id")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(a.hostClients()) > 1 || a.client().Remote() {
				// tmux's panes are this machine's: ssh to the host and
				// attach there.
				return usageError{fmt.Errorf("attach works on this machine's sessions only: run it on the host (ssh -t HOST sessionctl attach %s)", args[0])}
			}
			s, err := a.client().Session(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			tc, err := attachCommand(s, os.Getenv("TMUX"))
			if err != nil {
				return err
			}
			argv := tc.argv
			if printOnly || a.json {
				if a.json {
					return a.printJSON(argv)
				}
				quoted := make([]string, len(argv))
				for i, w := range argv {
					quoted[i] = shell.Quote(w)
					if w == ";" {
						quoted[i] = `\;`
					}
				}
				_, err := fmt.Fprintln(a.stdout, strings.Join(quoted, " "))
				return err
			}
			return execTmux(cmd.Context(), s, tc)
		},
	}
	cmd.Flags().BoolVar(&printOnly, "print", false, "print the tmux command instead of running it")
	return cmd
}

// tmuxCommand is a tmux command line and what it acts on.
type tmuxCommand struct {
	server []string // "-S", socket; none for the default server
	target string   // a pane id, or =session: of a launch
	argv   []string // the whole command, "tmux" first
}

// attachCommand is the tmux command that shows s's pane, for a client
// inside tmux server inTmux ($TMUX, "" outside tmux).
func attachCommand(s *api.Session, inTmux string) (tmuxCommand, error) {
	var c tmuxCommand
	switch {
	case s.Pane != nil:
		c.server, c.target = []string{"-S", s.Pane.Socket}, s.Pane.ID
	case s.Tmux != "" && !s.Status.Terminal():
		c.target = "=" + s.Tmux + ":"
	case s.Status.Terminal():
		return c, fmt.Errorf("session %s is %s: no pane to attach to (resume it with: sessionctl resume %s --tmux)", s.ID, s.Status, s.ID)
	default:
		return c, fmt.Errorf("session %s (pid %d) does not run in a tmux pane sessiond knows of: its process has no TMUX_PANE", s.ID, s.PID)
	}
	verb := "attach-session"
	if inTmux != "" {
		here, _, _ := strings.Cut(inTmux, ",")
		if s.Pane != nil && here != s.Pane.Socket {
			return c, fmt.Errorf("session %s runs on another tmux server (%s) than this one (%s): run attach outside tmux, or: TMUX= tmux -S %s attach-session -t %s",
				s.ID, s.Pane.Socket, here, shell.Quote(s.Pane.Socket), s.Pane.ID)
		}
		if s.Pane == nil {
			c.server = []string{"-S", here} // a launch's session on the default server: ours
		}
		verb = "switch-client"
	}
	c.argv = append(append([]string{"tmux"}, c.server...),
		"select-window", "-t", c.target, ";", "select-pane", "-t", c.target, ";", verb, "-t", c.target)
	return c, nil
}

// execTmux checks that the pane is still there and replaces sessionctl
// with tmux, which takes over the terminal.
func execTmux(ctx context.Context, s *api.Session, c tmuxCommand) error {
	bin, err := exec.LookPath("tmux")
	if err != nil {
		return fmt.Errorf("attach needs tmux: %w", err)
	}
	// The target first, for an error that names it rather than tmux's.
	probe := append(append([]string{}, c.server...), "display-message", "-p", "-t", c.target, "#{pane_id}")
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(pctx, bin, probe...).CombinedOutput(); err != nil {
		return fmt.Errorf("session %s's tmux pane %s is gone: %s", s.ID, c.target, strings.TrimSpace(string(out)))
	}
	if os.Getenv("TMUX") == "" && !term.IsTerminal(int(os.Stdin.Fd())) {
		return errors.New("attach needs a terminal (stdin is not one); --print shows the tmux command")
	}
	return syscall.Exec(bin, c.argv, os.Environ())
}
