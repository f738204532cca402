// Command sessionctl is the command-line client of sessiond: a thin layer
// over the Go client in package api. Every command takes --json, which
// prints the API's objects unchanged.
//
// Exit codes: 0 ok, 1 error, 2 usage, 3 daemon unreachable, 4 not found or
// ambiguous, 5 timed out (wait).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/lib/buildinfo"
)

// Exit codes.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitUnreachable = 3
	exitNotFound    = 4
	// exitTimeout (5, wait.go): the time ran out.
)

var version = ""

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	cancel()
	os.Exit(code)
}

// app holds what every command shares.
type app struct {
	socket string
	// hostFlags are the --host values; hosts what they (or
	// SESSIOND_HOST) name, none for the local socket (hostClients).
	hostFlags []string
	hosts     []api.Host
	hcs       []hostClient // hostClients, once made
	json      bool
	stdin     io.Reader
	stdout    io.Writer
	stderr    io.Writer
}

// client is the client of the one host a command talks to: the first
// --host, else the local socket. Commands that take several hosts use
// hostClients; those that act on one session, clientForID.
func (a *app) client() *api.Client { return a.hostClients()[0].c }

// printJSON prints v, the API's object, indented for people.
func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printRawJSON prints JSON the daemon sent: as it is for a pipe or a file
// (a script reads it), indented for a terminal (a person does).
func (a *app) printRawJSON(raw []byte) error {
	if f, ok := a.stdout.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			var buf bytes.Buffer
			if err := json.Indent(&buf, raw, "", "  "); err != nil {
				return fmt.Errorf("the daemon's answer is not JSON: %w", err)
			}
			raw = buf.Bytes()
		}
	}
	if _, err := a.stdout.Write(append(raw, '\n')); err != nil {
		return fmt.Errorf("write the list: %w", err)
	}
	return nil
}

// usageError marks errors of the command line itself (exit 2).
type usageError struct{ error }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{stdin: os.Stdin, stdout: stdout, stderr: stderr}
	root := newRoot(a)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var he *api.HostError
	if errors.As(err, &he) && he.Err != nil && ctx.Err() == nil {
		// ssh shares the terminal's process group: a Ctrl-C may end it
		// a moment before it reaches this process. That is the user
		// stopping the command, not a host failing.
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	if ctx.Err() != nil {
		return exitOK
	}
	var ue usageError
	var unreach *api.UnreachableError
	var te timeoutError
	switch {
	case errors.As(err, &te):
		fmt.Fprintln(stderr, "sessionctl:", err)
		return exitTimeout
	case errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command "):
		// cobra reports an unknown command as a plain error: it is the
		// command line's fault all the same.
		fmt.Fprintf(stderr, "sessionctl: %v\nRun 'sessionctl --help' for usage.\n", err)
		return exitUsage
	case errors.As(err, &unreach):
		fmt.Fprintln(stderr, "sessionctl:", err)
		return exitUnreachable
	case api.IsNotFound(err):
		fmt.Fprintln(stderr, "sessionctl:", err)
		var se *api.StatusError
		if errors.As(err, &se) && len(se.Body.Candidates) > 0 {
			fmt.Fprintln(stderr, "candidates:", strings.Join(se.Body.Candidates, " "))
		}
		return exitNotFound
	case errors.Is(err, context.Canceled):
		return exitOK
	}
	fmt.Fprintln(stderr, "sessionctl:", err)
	return exitError
}

func newRoot(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "sessionctl",
		Short: "Ask sessiond which agent sessions exist, run, are busy or stuck",
		Long: `sessionctl talks to sessiond, the per-user supervisor of AI coding-agent
sessions (Claude Code, OpenCode, Codex), over its Unix socket.

Statuses: starting, running (its owner process is alive), stopped,
interrupted (the owner died with work in flight), unknown.

Exit codes: 0 ok, 1 error, 2 usage, 3 daemon unreachable, 4 not found or
ambiguous, 5 timed out (wait).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&a.socket, "socket", api.DefaultSocket(api.DefaultStateDir()), "sessiond's socket ($SESSIOND_SOCKET)")
	root.PersistentFlags().StringArrayVarP(&a.hostFlags, "host", "H", nil, "a sessiond to ask, repeatable: unix:///path/to/socket or ssh://[user@]host[:port][/path-to-socket] (/~/path: under the far home) ($"+EnvHost+", comma-separated)")
	root.PersistentFlags().BoolVar(&a.json, "json", false, "print the API's JSON objects unchanged")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		for c := cmd; c != nil; c = c.Parent() {
			switch c.Name() {
			case "dial-stdio", "hook", "hooks", "help", "completion", cobra.ShellCompRequestCmd, cobra.ShellCompNoDescRequestCmd:
				// The far end of a host, and the agents' hooks, are
				// about this machine's socket only.
				return nil
			}
		}
		return a.resolveHosts()
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newLs(a), newShow(a), newEvents(a), newHealth(a), newVersion(a), newLaunch(a), newResume(a))
	root.AddCommand(actionCommands(a)...)
	root.AddCommand(newHook(a), newHooks(a), newWait(a), newAttach(a), newSend(a), newSends(a), newTop(a), newDialStdio(a))
	root.AddCommand(newWeb(a))
	root.AddCommand(newMCP(a))
	return root
}

// exactArgs is cobra.ExactArgs with a usage error (exit 2).
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("%s takes %s (got %d arguments)", cmd.Name(), what, len(args))}
		}
		for _, a := range args {
			if strings.TrimSpace(a) == "" {
				return usageError{fmt.Errorf("%s takes %s, not an empty string", cmd.Name(), what)}
			}
		}
		return nil
	}
}

func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("%s takes no arguments (got %q)", cmd.Name(), args[0])}
	}
	return nil
}

func newVersion(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print sessionctl's version and the daemon's, if it runs",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := map[string]string{"sessionctl": buildinfo.Version(version)}
			if h, err := a.client().Health(cmd.Context()); err == nil {
				out["sessiond"] = h.Version
			}
			if a.json {
				return a.printJSON(out)
			}
			fmt.Fprintln(a.stdout, "sessionctl", out["sessionctl"])
			if v, ok := out["sessiond"]; ok {
				fmt.Fprintln(a.stdout, "sessiond  ", v)
			} else {
				fmt.Fprintln(a.stdout, "sessiond   (not reachable at "+a.socket+")")
			}
			return nil
		},
	}
}
