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
	"github.com/sessiond/sessiond/internal/shell"
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
			s, err := a.client().Session(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			argv, err := attachArgv(s, os.Getenv("TMUX"))
			if err != nil {
				return err
			}
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
			return execTmux(cmd.Context(), s, argv)
		},
	}
	cmd.Flags().BoolVar(&printOnly, "print", false, "print the tmux command instead of running it")
	return cmd
}

// attachArgv is the tmux command that shows s's pane, for a client inside
// tmux server inTmux ($TMUX, "" outside tmux).
func attachArgv(s *api.Session, inTmux string) ([]string, error) {
	var server []string // -S socket, or none: the default server
	var target string   // a pane id, or =session: for a launch
	switch {
	case s.Pane != nil:
		server, target = []string{"-S", s.Pane.Socket}, s.Pane.ID
	case s.Tmux != "" && !s.Status.Terminal():
		target = "=" + s.Tmux + ":"
	case s.Status.Terminal():
		return nil, fmt.Errorf("session %s is %s: no pane to attach to (resume it with: sessionctl resume %s --tmux)", s.ID, s.Status, s.ID)
	default:
		return nil, fmt.Errorf("session %s (pid %d) does not run in a tmux pane sessiond knows of: its process has no TMUX_PANE", s.ID, s.PID)
	}
	show := []string{"select-window", "-t", target, ";", "select-pane", "-t", target, ";"}
	if inTmux == "" {
		return append(append(append([]string{"tmux"}, server...), show...), "attach-session", "-t", target), nil
	}
	here, _, _ := strings.Cut(inTmux, ",")
	if s.Pane != nil && here != s.Pane.Socket {
		return nil, fmt.Errorf("session %s runs on another tmux server (%s) than this one (%s): run attach outside tmux, or: TMUX= tmux -S %s attach-session -t %s",
			s.ID, s.Pane.Socket, here, shell.Quote(s.Pane.Socket), s.Pane.ID)
	}
	if s.Pane == nil {
		server = []string{"-S", here} // a launch's session on the default server: ours
	}
	return append(append(append([]string{"tmux"}, server...), show...), "switch-client", "-t", target), nil
}

// execTmux checks that the pane is still there and replaces sessionctl
// with tmux, which takes over the terminal.
func execTmux(ctx context.Context, s *api.Session, argv []string) error {
	bin, err := exec.LookPath("tmux")
	if err != nil {
		return fmt.Errorf("attach needs tmux: %w", err)
	}
	// argv is tmux [-S sock] select-window -t TARGET ; ...: check the
	// target first, for an error that names it rather than tmux's.
	i := 1
	if argv[1] == "-S" {
		i = 3
	}
	target := argv[i+2]
	probe := append(append([]string{}, argv[1:i]...), "display-message", "-p", "-t", target, "#{pane_id}")
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(pctx, bin, probe...).CombinedOutput(); err != nil {
		return fmt.Errorf("session %s's tmux pane %s is gone: %s", s.ID, target, strings.TrimSpace(string(out)))
	}
	if os.Getenv("TMUX") == "" {
		if !term.IsTerminal(int(os.Stdin.Fd())) {
			return errors.New("attach needs a terminal (stdin is not one); --print shows the tmux command")
		}
	}
	return syscall.Exec(bin, argv, os.Environ())
}
