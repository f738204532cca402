package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/session"
)

func newSend(a *app) *cobra.Command {
	var whenIdle, tmux bool
	var cancel string
	cmd := &cobra.Command{
		Use:   "send ID PROMPT | send --cancel SEND_ID",
		Short: "Give a session a prompt: now if it is idle, queued with --when-idle",
		Long: `send hands PROMPT to a session as its user would ("-" reads it from stdin):

  idle      typed into the tmux pane the agent runs in (an OpenCode session a
            server has: through the server's API); the turn starts at once
  stopped   resumed with the prompt, by resume's rules (--tmux: in tmux)
  busy      refused (exit 1), unless --when-idle: then sessiond keeps the
  waiting   prompt in its store and delivers it once, when the session is
            idle (or stopped: resumed with it); it survives a restart

sessionctl sends lists the queued prompts; send --cancel SEND_ID drops one
that is still queued.`,
		Example: `  sessionctl send 3ab8 "now run the tests"
  sessionctl send 3ab8 --when-idle "then commit"
  git diff | sessionctl send 3ab8 -
  sessionctl send --cancel 9f1c2d`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case cancel != "" && len(args) != 0:
				return usageError{fmt.Errorf("send --cancel takes no other arguments")}
			case cancel == "" && len(args) != 2:
				return usageError{fmt.Errorf("send takes a session id and a prompt")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if cancel != "" {
				c, err := a.oneHost(cmd)
				if err != nil {
					return err
				}
				x, err := c.CancelSend(ctx, cancel)
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(x)
				}
				_, err = fmt.Fprintf(a.stdout, "cancelled prompt %s for session %s\n", x.ID, x.SessionID)
				return err
			}
			prompt := args[1]
			if prompt == "-" {
				b, err := io.ReadAll(io.LimitReader(a.stdin, 1<<20))
				if err != nil {
					return fmt.Errorf("read the prompt from stdin: %w", err)
				}
				prompt = strings.TrimRight(string(b), "\n")
			}
			req := api.SendRequest{Prompt: prompt, WhenIdle: whenIdle}
			if tmux {
				req.Mode = "tmux"
			}
			c, err := a.clientForID(ctx, args[0])
			if err != nil {
				return err
			}
			r, err := c.Send(ctx, args[0], req)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(r)
			}
			if r.Queued != nil {
				why := fmt.Sprintf("session %s is %s", r.Session.ID, activityWord(r.Session))
				switch {
				case r.Queued.Error != "":
					why = r.Queued.Error // "waiting: nothing was typed …: why"
				case session.PromptPending(r.Session.PromptAt, r.Session.ActivitySince):
					why = fmt.Sprintf("session %s has not taken up the prompt it was handed at %s", r.Session.ID, r.Session.PromptAt.Local().Format("15:04:05"))
				}
				_, err = fmt.Fprintf(a.stdout, "queued as %s: %s; delivered when it is idle (sessionctl send --cancel %s to drop it)\n",
					r.Queued.ID, why, r.Queued.ID)
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "delivered to %s via %s\n", r.Session.ID, r.Via)
			return err
		},
	}
	cmd.Flags().BoolVar(&whenIdle, "when-idle", false, "queue the prompt while the session is busy or waiting")
	cmd.Flags().BoolVar(&tmux, "tmux", false, "a stopped session is resumed in tmux, not headless")
	cmd.Flags().StringVar(&cancel, "cancel", "", "cancel the queued prompt SEND_ID")
	return cmd
}

func activityWord(s api.Session) string {
	if s.Status == session.StatusRunning && s.Activity != "" {
		return string(s.Activity)
	}
	return string(s.Status)
}

func newSends(a *app) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "sends [ID]",
		Short: "List the prompts queued by send --when-idle",
		Long: `sends lists the prompts waiting for their sessions (of session ID only,
when given), oldest first; --all adds those delivered, failed or cancelled in
the last 7 days, with how each was delivered or why it failed.`,
		Example: `  sessionctl sends
  sessionctl sends 3ab8 --all --json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError{fmt.Errorf("sends takes at most one session id")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ref := ""
			if len(args) == 1 {
				ref = args[0]
			}
			c, err := a.oneHost(cmd)
			if err != nil {
				return err
			}
			sends, err := c.Sends(cmd.Context(), ref, all)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(sends)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SEND\tSESSION\tSTATE\tAGE\tPROMPT\tDETAIL")
			for _, x := range sends {
				detail := x.Via
				if x.Error != "" {
					detail = x.Error
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", x.ID, x.SessionID, x.State,
					time.Since(x.CreatedAt).Round(time.Second), clip(oneLine(x.Prompt), 40), detail)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "include delivered, failed and cancelled prompts")
	return cmd
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
