package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sessiond/sessiond/cmd/sessionctl/hookinstall"
)

// mcpInstallCommands are `sessionctl mcp install|uninstall|status`.
func mcpInstallCommands(a *app) []*cobra.Command {
	return []*cobra.Command{newMCPChange(a, "install"), newMCPChange(a, "uninstall"), newMCPStatus(a)}
}

// mcpAgent is where the agent reads its MCP servers, for this user.
func mcpAgent(name string) (hookinstall.MCPAgent, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return hookinstall.MCPAgent{}, err
	}
	m, err := hookinstall.MCPFor(name, home, os.Getenv)
	if err != nil {
		return m, usageError{err}
	}
	return m, nil
}

// mcpServerArgs are the arguments the agent starts sessionctl with: mcp,
// and the socket, hosts and --read-only this install was given.
func mcpServerArgs(cmd *cobra.Command, a *app, readOnly bool) ([]string, error) {
	args := []string{"mcp"}
	if cmd.Flags().Changed("socket") || os.Getenv("SESSIOND_SOCKET") != "" {
		sock, err := filepath.Abs(a.socket)
		if err != nil {
			return nil, err
		}
		args = append(args, "--socket", sock)
	}
	for _, h := range a.hostFlags {
		args = append(args, "--host", h)
	}
	if readOnly {
		args = append(args, "--read-only")
	}
	return args, nil
}

func newMCPChange(a *app, verb string) *cobra.Command {
	var dry, readOnly bool
	short := "Add sessionctl mcp to an agent's MCP servers (a backup first)"
	if verb == "uninstall" {
		short = "Take sessionctl mcp out again: the file as it was before the install"
	}
	cmd := &cobra.Command{
		Use:   verb + " AGENT",
		Short: short,
		Long: short + `.

  claude    "mcpServers" of ~/.claude.json ($CLAUDE_CONFIG_DIR/.claude.json):
            the user scope, as 'claude mcp add --scope user' writes it
  codex     [mcp_servers.sessiond] of $CODEX_HOME/config.toml (~/.codex)
  opencode  "mcp" of ~/.config/opencode/opencode.json

The server is named sessiond. As with 'sessionctl hooks': only sessiond's
entry changes, every other byte stays; a symlinked file is written through
its link; the file as it was is kept in <file>.sessiond-backup, and
uninstall puts it back byte for byte when nothing else changed since.
--dry-run shows the diff and writes nothing. --socket, --host and
--read-only given to install are passed on to the server.`,
		Example: `  sessionctl mcp install claude
  sessionctl mcp install codex --read-only --dry-run
  sessionctl mcp uninstall opencode`,
		Args:      exactArgs(1, "the agent (claude, codex, opencode)"),
		ValidArgs: hookinstall.MCPAgentNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := mcpAgent(args[0])
			if err != nil {
				return err
			}
			var p *hookinstall.Plan
			if verb == "install" {
				exe, err := sessionctlPath()
				if err != nil {
					return err
				}
				sargs, err := mcpServerArgs(cmd, a, readOnly)
				if err != nil {
					return err
				}
				p, err = m.Install(exe, sargs)
				if err != nil {
					return err
				}
			} else if p, err = m.Uninstall(); err != nil {
				return err
			}
			if !dry {
				if err := p.Apply(); err != nil {
					return err
				}
			}
			if a.json {
				return a.printJSON(struct {
					Path    string `json:"path"`
					Changed bool   `json:"changed"`
					Applied bool   `json:"applied"`
					Note    string `json:"note"`
					Diff    string `json:"diff,omitempty"`
				}{p.Path, p.Changed(), !dry && p.Changed(), p.Note, p.Diff()})
			}
			state := "unchanged"
			switch {
			case p.Changed() && dry:
				state = "would change"
			case p.Changed():
				state = "changed"
			}
			fmt.Fprintf(a.stdout, "%s: %s: %s\n", p.Path, state, p.Note)
			if dry {
				fmt.Fprint(a.stdout, p.Diff())
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&dry, "dry-run", false, "show what would change, as a diff, and change nothing")
	if verb == "install" {
		cmd.Flags().BoolVar(&readOnly, "read-only", false, "the agent gets only the reading tools")
	}
	return cmd
}

func newMCPStatus(a *app) *cobra.Command {
	return &cobra.Command{
		Use:       "status [AGENT]",
		Short:     "Show in which agents' MCP configuration sessionctl mcp is installed",
		Args:      cobra.MaximumNArgs(1),
		ValidArgs: hookinstall.MCPAgentNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			names := hookinstall.MCPAgentNames
			if len(args) == 1 {
				names = args
			}
			var all []hookinstall.MCPStatus
			for _, n := range names {
				m, err := mcpAgent(n)
				if err != nil {
					return err
				}
				all = append(all, m.Status())
			}
			if a.json {
				return a.printJSON(all)
			}
			tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "AGENT\tFILE\tMCP\tCOMMAND")
			for _, s := range all {
				state, what := "not installed", ""
				switch {
				case s.Error != "":
					state, what = "?", s.Error
				case s.Installed:
					state, what = "installed", strings.Join(append([]string{s.Command}, s.Args...), " ")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Agent, s.Path, state, what)
			}
			return tw.Flush()
		},
	}
}
