package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/view"
)

// exitTimeout is wait's exit code when the time ran out.
const exitTimeout = 5

// timeoutError ends wait with exitTimeout.
type timeoutError struct{ error }

// waitConds are the states wait can wait for, with what each means.
var waitConds = map[string]struct {
	help string
	met  func(s api.Session, start api.Session) bool
}{
	"idle": {"running and idle: the turn ended, the agent waits for a prompt",
		func(s, _ api.Session) bool {
			return s.Status == session.StatusRunning && s.Activity == session.ActivityIdle
		}},
	"waiting": {"running and waiting for the user (a permission, a question)",
		func(s, _ api.Session) bool {
			return s.Status == session.StatusRunning && s.Activity == session.ActivityWaiting
		}},
	"stopped": {"its owner is gone: stopped or interrupted",
		func(s, _ api.Session) bool { return s.Status.Terminal() }},
	"done": {"nothing more happens without you: idle, waiting, stopped or interrupted",
		func(s, _ api.Session) bool {
			return s.Status.Terminal() || s.Status == session.StatusRunning && (s.Activity == session.ActivityIdle || s.Activity == session.ActivityWaiting)
		}},
	"change": {"its status, activity or what it waits for changed",
		func(s, start api.Session) bool {
			return s.Status != start.Status || s.Activity != start.Activity || !s.WaitingFor.Equal(start.WaitingFor)
		}},
}

func newWait(a *app) *cobra.Command {
	var until string
	var anyOf bool
	var timeout time.Duration
	var names []string
	for n := range waitConds {
		names = append(names, n)
	}
	help := ""
	for _, n := range []string{"idle", "waiting", "stopped", "done", "change"} {
		help += fmt.Sprintf("  %-8s %s\n", n, waitConds[n].help)
	}
	cmd := &cobra.Command{
		Use:   "wait ID... --until idle|waiting|stopped|done|change",
		Short: "Block until sessions reach a state, from the event stream",
		Long: `wait blocks until every session named (with --any: one of them) is in the
state --until names, then prints the sessions that got there and exits 0. A
session already there counts at once (except for change).

` + help + `
It follows sessiond's event stream, and reconnects when sessiond restarts.
Exit codes: 0 reached, 5 --timeout passed first, 3 sessiond unreachable, 4 a
session not found.`,
		Example: `  sessionctl wait 3ab8 --until idle && sessionctl resume 3ab8 --prompt "next"
  sessionctl wait 3ab8 5e55 --any --until waiting --timeout 10m --json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{fmt.Errorf("wait takes one or more session ids")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cond, ok := waitConds[until]
			if !ok {
				return usageError{fmt.Errorf("--until %q: want one of idle, waiting, stopped, done, change", until)}
			}
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			err := waitFor(ctx, a, args, cond.met, anyOf)
			if errors.Is(err, context.DeadlineExceeded) && cmd.Context().Err() == nil {
				return timeoutError{fmt.Errorf("timed out after %s: not %s yet: %s", timeout, until, strings.Join(args, " "))}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&until, "until", "", "the state to wait for: idle, waiting, stopped, done, change (required)")
	cmd.Flags().BoolVar(&anyOf, "any", false, "return when any one session gets there, not all")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long, exit 5 (default: wait for ever)")
	_ = cmd.MarkFlagRequired("until")
	_ = cmd.RegisterFlagCompletionFunc("until", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return names, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// waitFor resolves the sessions (each on its host, when several were
// named), then, for each host at once, takes the event stream's position,
// checks its sessions and follows the stream until the condition holds
// for all (or any) of the sessions. Each session met is printed once, as
// met.
func waitFor(ctx context.Context, a *app, refs []string, met func(s, start api.Session) bool, anyOf bool) error {
	// Every session is resolved (on its host) before any is reported,
	// so "all" counts them all.
	st := &waitState{a: a, met: met, anyOf: anyOf, start: map[waitKey]api.Session{}, done: map[waitKey]bool{}}
	var clients []*api.Client // the hosts followed, once each
	for _, ref := range refs {
		c, s, err := a.sessionOnHosts(ctx, ref)
		if err == nil && s == nil {
			s, err = c.Session(ctx, ref)
		}
		if err != nil {
			return err
		}
		if !slices.Contains(clients, c) {
			clients = append(clients, c)
		}
		st.start[waitKey{c.Host, s.ID}] = *s
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(clients))
	for _, c := range clients {
		go func() {
			err := waitHost(ctx, c, st)
			if err != nil || st.finished() {
				cancel()
			}
			errs <- err
		}()
	}
	var first error
	for range clients {
		if err := <-errs; err != nil && first == nil && !(errors.Is(err, context.Canceled) && st.finished()) {
			first = err
		}
	}
	if st.finished() {
		return nil
	}
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// waitKey is a session on a host ("" for the one host).
type waitKey struct{ host, id string }

// waitState is what every host's follower of one wait shares.
type waitState struct {
	a     *app
	met   func(s, start api.Session) bool
	anyOf bool

	mu    sync.Mutex
	start map[waitKey]api.Session // written before the followers start
	done  map[waitKey]bool
}

func (st *waitState) ours(host, id string) bool {
	_, ok := st.start[waitKey{host, id}]
	return ok
}

func (st *waitState) finished() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.finishedLocked()
}

func (st *waitState) finishedLocked() bool {
	return len(st.done) > 0 && (st.anyOf || len(st.done) == len(st.start))
}

// report prints s if it has just got there, and says whether the wait is
// over.
func (st *waitState) report(host string, s api.Session) (bool, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	k := waitKey{host, s.ID}
	if st.finishedLocked() {
		return true, nil
	}
	if st.done[k] || !st.met(s, st.start[k]) {
		return false, nil
	}
	st.done[k] = true
	s.Host = host
	if err := st.a.printSessionLine(s); err != nil {
		return false, err
	}
	return st.finishedLocked(), nil
}

// waitHost follows one host until the wait is over: its sessions are
// checked, then the stream followed (and, when the host's sessiond
// restarts, the sessions checked again and the stream taken up where it
// was).
func waitHost(ctx context.Context, c *api.Client, st *waitState) error {
	h, err := c.Health(ctx)
	if err != nil {
		return err
	}
	since := h.LastEventSeq
	var mine []string
	for k := range st.start {
		if k.host == c.Host {
			mine = append(mine, k.id)
		}
	}
	check := func() (bool, error) {
		for _, id := range mine {
			s, err := c.Session(ctx, id)
			if err != nil {
				return false, err
			}
			if fin, err := st.report(c.Host, *s); fin || err != nil {
				return fin, err
			}
		}
		return false, nil
	}
	if fin, err := check(); fin || err != nil {
		return err
	}
	errDone := errors.New("done")
	for {
		err := c.Events(ctx, api.EventsOptions{Since: since, Follow: true}, func(ev api.Event) error {
			since = ev.Seq
			if !st.ours(c.Host, ev.SessionID) {
				return nil
			}
			s, err := c.Session(ctx, ev.SessionID)
			if err != nil {
				return err
			}
			if fin, err := st.report(c.Host, *s); err != nil || fin {
				return orErr(err, errDone)
			}
			return nil
		})
		switch {
		case errors.Is(err, errDone):
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && !isUnreachable(err):
			return err
		}
		// The stream ended (sessiond restarted): look again, then follow
		// from where it was.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		if fin, err := check(); fin || (err != nil && !isUnreachable(err)) {
			return err
		}
	}
}

func orErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

func isUnreachable(err error) bool {
	var u *api.UnreachableError
	return errors.As(err, &u)
}

// printSessionLine prints a session wait met: its JSON object on one line
// with --json, else id, status and activity and what it waits for.
func (a *app) printSessionLine(s api.Session) error {
	if a.json {
		b, err := json.Marshal(s)
		if err != nil {
			return err
		}
		_, err = a.stdout.Write(append(b, '\n'))
		return err
	}
	act := string(s.Activity)
	if s.WaitingFor != nil {
		act += " (" + view.WaitingWords(s.WaitingFor) + ")"
	}
	_, err := fmt.Fprintf(a.stdout, "%s\t%s\t%s\t%s\n", s.ID, s.Agent, s.Status, act)
	return err
}
