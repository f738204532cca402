// Package kit holds what sessiond's adapters share to read an agent's
// files incrementally and to survive a restart without reading them again:
// what a new adapter is written with.
//
// An adapter is a package adapters/<agent> that implements
// adapters.Adapter: Name, WatchPaths (hints only) and Discover, which lists
// the agent's files where they changed, reads only what changed in each,
// and says which sessions exist, who could own them (processes the agent's
// data names, checked against the snapshot) and what their data shows. It
// decides no liveness: the tracker probes the owners. It is registered in
// package agents (its name, default roots, hooks) and built in
// cmd/sessiond. Reading incrementally, it also implements
// adapters.Rescanner and adapters.Checkpointer with these pieces:
//
//   - Rescan, the full-rescan clock: Discover asks Due, RequestRescan calls
//     Request. A pass is full (every folder listed, every file stat'ed) the
//     first time, on request (a watcher overflowed) and every
//     Config.FullRescan; the others trust unchanged mtimes, since change
//     notifications are only hints.
//   - Settled and RacyWindow: a stat taken within RacyWindow of a file's or
//     folder's mtime does not show a change made in the same mtime tick
//     (git's "racily clean" entries); that input is looked at again.
//   - Dirs, the folders a pass lists with their last listings: Dirs.List
//     lists a folder again only when its mtime changed, its listing was
//     not settled or the pass is full, and keeps the last listing of one
//     it cannot read (codex, gemini, qwen and pi list their session
//     folders so). Dirs.ListPaths also hands out the names joined to the
//     folder, kept with the listing, and Prune drops the inputs a pass
//     did not list: an idle pass joins, and allocates, nothing per file.
//   - FileID, a file's (device, inode): a file replaced at its path (a
//     rewrite, a restored copy) is read from its start, not continued.
//   - Book, the checkpoint's ledger: for each entry the store holds, the
//     version of the state it was encoded from. A state's version is a
//     generation its reads bump (claude, codex), or the state itself when
//     reads replace rather than change it (opencode's sessions, whose
//     entries are also compared by content: Changes.PutSum). Checkpoint
//     puts what changed since its save and deletes the entries of inputs
//     gone; Commit, once the store wrote them, marks them saved.
//   - Restored holds the entries Restore handed back until the pass that
//     lists their inputs takes them (decoded then or at Restore); the first
//     full pass drops those it did not take, and the next Checkpoint
//     deletes them.
//   - Entries, Restore and Checkpoint whole for an adapter with one entry
//     per input, keyed by its path and versioned by a generation (codex,
//     gemini, qwen, pi, copilot): the adapter makes one of its Book,
//     Restored, counter and lock, with its encoder and decoder, and hands
//     Checkpoint the states to save; the loops over entries are the kit's.
//     Claude (entries decoded when taken) and opencode (entries by
//     content) drive Book and Restored themselves.
//   - Entries are encoded with package wire, each starting with the
//     adapter's format byte, which wire.Reader.Format checks. Bump it when
//     the layout changes or what the saved state means (a parser fix that
//     would conclude differently from the same input): a restart then reads
//     those inputs again rather than trust an older build.
//   - Quiet, the sessions no process owns handed to the tracker as one
//     adapters.QuietSet, the same pointer while they stay equal
//     (Observed.Equal), so an idle pass skips them. With SplitAt and
//     Again, an adapter that keys its observations by what they are built
//     from (Key: its read counter and a count of files listed or gone)
//     builds nothing at all on a pass where the key holds and nothing can
//     make a session loud (no process of its agent, no marked tool, nothing
//     remembered): gemini, qwen, pi, copilot and codex do. Each adapter holds an
//     idle pass equal to a fresh adapter's after every kind of change
//     (TestIdlePassIsTheLastOne), which fails when a change is not counted.
//   - Each and ReadEach, a pass's reads on every core: an adapter splits
//     its refresh of one input into a read that touches that input alone
//     and a noteRead that bumps the shared read counter and drift tally;
//     ReadEach runs the reads of all due inputs through Each (from
//     ParallelMin of them: a first start's folds, a restart's stats), then
//     the noteReads in order, so the generations and checkpoints are as a
//     serial pass's (gemini, pi, copilot; qwen, which counts bytes, calls
//     Each itself).
//   - Reader and PutReader, pooled 64 KiB line readers: a first pass reads
//     every file once, and what a fold keeps it copies out of the buffer
//     (gemini, copilot, claude's appended transcript reads).
//   - Seen and Drift, format drift said out loud: agents change their
//     formats weekly, and what a reader does not understand (a line or
//     item type, a status or waitingFor value, a hook event, a field of
//     another JSON type) must neither stop it nor pass in silence. The
//     reader notes each such value in the input's Seen (Seen.Add; kinds
//     are adapters.DriftKind), kept in the input's state beside what the
//     read concluded, so a read that continues an input adds to it and one
//     that starts over (a replaced file, a new tail) starts it over too:
//     what it holds is what a whole read of the input now would hold.
//     After each read the adapter hands the input's Seen, with the agent
//     version its data names, to its Drift (Drift.Set; Drift.Forget when
//     the input is gone): Drift counts inputs, never lines, so a re-read
//     counts once, and an unchanged input costs nothing. Observation.Drift
//     is Drift.Report; each session read from such an input gets
//     Seen.Problem (format_drift) among its Problems. The Seen is saved in
//     the input's checkpoint entry (Seen.Append, ReadSeen) and handed to
//     Drift again when a restored entry is taken, so a restart keeps the
//     counts. Nothing here changes a status: liveness is the owner's
//     process alone.
//
// The other shared packages: lineage, the process tree seen below live
// owners (the evidence that attributes what a dead one left behind;
// Memory.AddToolProcs is the whole pass of an agent that marks its tools
// with their session: codex, qwen, copilot); inputlog, unreadable inputs
// logged once per change; hookjson, hook payloads; oneline, an agent's
// words made to fit a field (Argv, a command line in a problem's
// detail); paths. The
// codex adapter (discover.go, owners.go, checkpoint.go) is the smallest
// complete example.
package kit

import (
	"sync/atomic"
	"time"
)

// RacyWindow is how long after an input's last change (its mtime) a stat
// of it is not trusted to show the next one: a write within the same tick
// of the file system's clock can leave mtime and size as they were. 2 s
// covers the coarsest clocks.
const RacyWindow = 2 * time.Second

// Settled reports whether a stat taken at at, showing mtime, shows every
// change up to at: at is RacyWindow or more after mtime. An input looked
// at before it settled is looked at again next pass, even if its stat is
// unchanged.
func Settled(mtime, at time.Time) bool { return at.Sub(mtime) >= RacyWindow }

// Rescan is the full-rescan clock. Request is safe from any goroutine;
// Due is called by the pass, which passes serialize.
type Rescan struct {
	force atomic.Bool
	last  time.Time
}

// Request makes the next pass a full one (adapters.Rescanner).
func (r *Rescan) Request() { r.force.Store(true) }

// Due reports whether the pass at now is full: one was requested, none
// ran yet, or every has passed since the last. A full pass restarts the
// clock at now.
func (r *Rescan) Due(now time.Time, every time.Duration) bool {
	full := r.force.Swap(false) || r.last.IsZero() || now.Sub(r.last) >= every
	if full {
		r.last = now
	}
	return full
}
