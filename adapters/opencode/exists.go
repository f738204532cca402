package opencode

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Existence answers "does this OpenCode session exist?" with three values,
// because resuming must tell a session that is gone from one that could not
// be checked: only Missing justifies starting over.
type Existence int

const (
	// Unknown: it could not be told (a locked or unreadable database, a
	// server answering 5xx or timing out).
	Unknown Existence = iota
	// Exists: a database row, a legacy file or a server has it.
	Exists
	// Missing: every input answered, and none has it (no row; a server's
	// 404 NotFoundError).
	Missing
)

func (e Existence) String() string {
	switch e {
	case Exists:
		return "exists"
	case Missing:
		return "missing"
	}
	return "unknown"
}

// validID rejects ids that cannot be OpenCode session ids (and could
// escape the legacy storage directory). `opencode -s` with an unknown id
// exits 1, so callers should check before launching.
func validID(id string) bool {
	if id == "" || len(id) > 256 || id == "." || id == ".." {
		return false
	}
	return !strings.ContainsAny(id, "/\\\x00")
}

// SessionExists checks whether a session exists: in every opencode*.db, in legacy
// storage, and, when a database could not answer, on the servers found in
// the last Discover pass that are still this user's. The error explains an
// Unknown answer.
func (a *Adapter) SessionExists(ctx context.Context, sessionID string) (Existence, error) {
	if !validID(sessionID) {
		return Missing, nil
	}
	paths, err := a.databases()
	if err != nil {
		return Unknown, err
	}
	var errs []error
	for _, p := range paths {
		ok, err := sessionExists(ctx, p, a.cfg.BusyTimeout, sessionID)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			continue
		}
		if ok {
			return Exists, nil
		}
	}
	if ok, err := legacyExists(a.legacy.root, sessionID); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", a.legacy.root, err))
	} else if ok {
		return Exists, nil
	}
	if len(errs) == 0 {
		return Missing, nil
	}
	// A database could not answer: a server reads the same data, if it is
	// still this user's.
	verdict := Unknown
	for _, s := range a.Servers() {
		if err := a.checkServer(s); err != nil {
			errs = append(errs, err)
			continue
		}
		err := a.get(ctx, s.URL, "/session/"+url.PathEscape(sessionID), "", nil)
		var he *httpError
		switch {
		case err == nil:
			return Exists, nil
		case errors.As(err, &he) && he.Code == http.StatusNotFound && he.Name == "NotFoundError":
			verdict = Missing
		default:
			errs = append(errs, fmt.Errorf("server %s: %w", s.URL, err))
		}
	}
	if verdict == Missing {
		return Missing, nil
	}
	return Unknown, errors.Join(errs...)
}
