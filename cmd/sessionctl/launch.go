package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sessiond/sessiond/agents"
	"github.com/sessiond/sessiond/api"
)

func newLaunch(a *app) *cobra.Command {
	var req api.LaunchRequest
	var tmux bool
	var env []string
	cmd := &cobra.Command{
		Use:   "launch --agent claude|opencode|codex|qwen --cwd DIR [--prompt TEXT] [--tmux] [--env K=V] [-- extra agent args]",
		Short: "Launch an agent session that sessiond tracks from its first millisecond",
		Long: `Launch an agent session. Headless (the default) runs one prompt with its
output in a log under sessiond's state dir; --tmux starts the interactive
CLI in a detached tmux session and prints how to attach. Arguments after
-- go to the agent unchanged.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if req.Agent == "" {
				return usageError{fmt.Errorf("launch needs --agent (claude, opencode, codex or qwen)")}
			}
			if req.Cwd == "" {
				wd, err := os.Getwd()
				if err != nil {
					return err
				}
				req.Cwd = wd
			}
			abs, err := filepath.Abs(req.Cwd)
			if err != nil {
				return usageError{err}
			}
			req.Cwd, req.Args = abs, args
			for _, kv := range env {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return usageError{fmt.Errorf("--env %q: want KEY=VALUE", kv)}
				}
				if req.Env == nil {
					req.Env = map[string]string{}
				}
				req.Env[k] = v
			}
			if tmux {
				req.Mode = "tmux"
			}
			c, err := a.oneHost(cmd)
			if err != nil {
				return err
			}
			resp, err := c.Launch(cmd.Context(), req)
			if err != nil {
				return err
			}
			return a.printLaunch(resp, "launched")
		},
	}
	cmd.Flags().StringVar(&req.Agent, "agent", "", "claude, opencode, codex or qwen")
	cmd.Flags().StringVar(&req.Cwd, "cwd", "", "directory to run in (default: the current one)")
	cmd.Flags().StringVar(&req.Prompt, "prompt", "", "the first prompt (required headless)")
	cmd.Flags().BoolVar(&tmux, "tmux", false, "run the interactive CLI in a detached tmux session")
	cmd.Flags().StringArrayVar(&env, "env", nil, "set KEY=VALUE in the agent's environment (repeatable)")
	_ = cmd.RegisterFlagCompletionFunc("agent", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return agents.Names(), cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

func newResume(a *app) *cobra.Command {
	var req api.ResumeRequest
	var tmux bool
	cmd := &cobra.Command{
		Use:   "resume ID [--prompt TEXT] [--cwd DIR] [--tmux] [--fork] [-- extra agent args]",
		Short: "Continue the same upstream conversation of a session",
		Long: `Resume continues the session's own upstream conversation (its durable
resume cursor), never an empty one. It refuses while the session runs
(exit 1, "already running"), unless --fork. If the agent deleted the
conversation, it starts a fresh one under the same id and says so; if it
cannot tell, it launches nothing and fails. A --cwd other than the
recorded one forks the conversation, with its history, into that dir.
Arguments after -- go to the agent unchanged, as for launch.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				return exactArgs(1, "one session id before --")(cmd, args[:dash])
			}
			return exactArgs(1, "one session id")(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Args = args[1:]
			if req.Cwd != "" {
				abs, err := filepath.Abs(req.Cwd)
				if err != nil {
					return usageError{err}
				}
				req.Cwd = abs
			}
			if tmux {
				req.Mode = "tmux"
			}
			c, err := a.clientForID(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			resp, err := c.Resume(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			verb := "resumed"
			switch {
			case resp.Forked:
				verb = "forked"
			case resp.Fresh:
				verb = "started fresh"
			}
			return a.printLaunch(resp, verb)
		},
	}
	cmd.Flags().StringVar(&req.Prompt, "prompt", "", "the follow-up prompt")
	cmd.Flags().StringVar(&req.Cwd, "cwd", "", "run in this directory (another than the recorded one forks)")
	cmd.Flags().BoolVar(&tmux, "tmux", false, "run the interactive CLI in a detached tmux session")
	cmd.Flags().BoolVar(&req.Fork, "fork", false, "start a new upstream session carrying this one's history")
	return cmd
}

func (a *app) printLaunch(resp *api.LaunchResponse, verb string) error {
	if a.json {
		return a.printJSON(resp)
	}
	s := resp.Session
	fmt.Fprintf(a.stdout, "%s %s session %s (pid %d) in %s\n", verb, s.Agent, s.ID, s.PID, shortPath(s.Cwd))
	if s.UpstreamID != "" {
		fmt.Fprintf(a.stdout, "upstream id: %s\n", s.UpstreamID)
	}
	if resp.Reason != "" {
		fmt.Fprintf(a.stdout, "note: %s\n", resp.Reason)
	}
	if resp.LogPath != "" {
		fmt.Fprintf(a.stdout, "log: %s\n", resp.LogPath)
	}
	if resp.Attach != "" {
		fmt.Fprintf(a.stdout, "attach: %s\n", resp.Attach)
	}
	return nil
}
