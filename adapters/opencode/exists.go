package opencode

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/sessiond/sessiond/adapters"
)

// validID rejects ids that cannot be OpenCode session ids (and could
// escape the legacy storage directory). `opencode -s` with an unknown id
// exits 1, so callers should check before launching.
func validID(id string) bool {
	if id == "" || len(id) > 256 || id == "." || id == ".." {
		return false
	}
	return !strings.ContainsAny(id, "/\\\x00")
}

// exists checks whether a session exists: in every opencode*.db, in legacy
// storage, and, when a database could not answer, on the servers found in
// the last Discover pass that are still this user's. Resuming must tell a
// session that is gone from one that could not be checked: the answer is
// Exists when a database row, a legacy file or a server has it; Missing
// only when every input answered and none has it (no row; a server's 404
// NotFoundError), the one answer that justifies starting over; else
// ExistenceUnknown (a locked or unreadable database, a server answering
// 5xx or timing out), which the error explains.
func (a *Adapter) exists(ctx context.Context, sessionID string) (adapters.Existence, error) {
	if !validID(sessionID) {
		return adapters.Missing, nil
	}
	paths, err := a.databases()
	if err != nil {
		return adapters.ExistenceUnknown, err
	}
	var errs []error
	for _, p := range paths {
		ok, err := sessionExists(ctx, p, a.cfg.BusyTimeout, sessionID)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			continue
		}
		if ok {
			return adapters.Exists, nil
		}
	}
	if ok, err := legacyExists(a.legacy.root, sessionID); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", a.legacy.root, err))
	} else if ok {
		return adapters.Exists, nil
	}
	if len(errs) == 0 {
		return adapters.Missing, nil
	}
	// A database could not answer: a server reads the same data, if it is
	// still this user's.
	verdict := adapters.ExistenceUnknown
	for _, s := range a.lastServers() {
		if err := a.checkServer(s); err != nil {
			errs = append(errs, err)
			continue
		}
		err := a.get(ctx, s.URL, "/session/"+url.PathEscape(sessionID), "", nil)
		var he *httpError
		switch {
		case err == nil:
			return adapters.Exists, nil
		case errors.As(err, &he) && he.Code == http.StatusNotFound && he.Name == "NotFoundError":
			verdict = adapters.Missing
		default:
			errs = append(errs, fmt.Errorf("server %s: %w", s.URL, err))
		}
	}
	if verdict == adapters.Missing {
		return adapters.Missing, nil
	}
	return adapters.ExistenceUnknown, errors.Join(errs...)
}
