package claude

import "github.com/sessiond/sessiond/adapters/claude/transcript"

// Used only by tests.

// counters returns the counters so far.
func (a *Adapter) counters() stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.stats
	s.BytesRead = a.bytesRead.Load()
	return s
}

// transcriptInfo is what the adapter knows of one session's transcript:
// where it lives and what its lines said (the file's summary).
type transcriptInfo struct {
	Root string
	Path string
	Size int64
	transcript.Summary
}

// lookup returns what the last pass knew of the transcript of upstreamID.
// ok is false when no root held it at the last pass (it may have been
// deleted by Claude's cleanupPeriodDays, or never written).
func (a *Adapter) lookup(upstreamID string) (transcriptInfo, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var best transcriptInfo
	found := false
	for _, r := range a.roots {
		for _, p := range r.projects {
			for _, f := range p.files {
				if f.id != upstreamID || !f.read {
					continue
				}
				info := transcriptInfo{Root: r.path, Path: f.path, Size: f.size, Summary: f.sum}
				if !found || info.Last.After(best.Last) {
					best, found = info, true
				}
			}
		}
	}
	return best, found
}
