// Package inputlog logs an adapter's unreadable inputs when the set
// changes, not at every pass: a pass every few seconds would otherwise
// repeat the same warning until the input is fixed.
package inputlog

import (
	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
)

// Log remembers the last pass's input errors. Not safe for concurrent
// use: an adapter calls it from its serialized Discover.
type Log struct {
	log  *zap.Logger
	what string // "Claude Code data", "Codex data"
	last map[string]string
}

// New logs to log about what ("Codex data").
func New(log *zap.Logger, what string) *Log {
	return &Log{log: log, what: what, last: map[string]string{}}
}

// Report warns of each input error new or changed since the last report,
// and notes each input readable again.
func (l *Log) Report(errs []adapters.InputError) {
	now := make(map[string]string, len(errs))
	for _, e := range errs {
		now[e.Input] = e.Err.Error()
		if l.last[e.Input] != e.Err.Error() {
			l.log.Warn("cannot read "+l.what, zap.String("input", e.Input), zap.Error(e.Err))
		}
	}
	for in := range l.last {
		if _, ok := now[in]; !ok {
			l.log.Info(l.what+" readable again", zap.String("input", in))
		}
	}
	l.last = now
}
