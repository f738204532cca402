package daemon

import (
	"context"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/tracker"
)

// maxWatches bounds the directories watched, so a huge history cannot
// exhaust inotify watches (or, on macOS, kqueue's descriptor per watch).
const maxWatches = 4096

// watchAdapters turns changes under the adapters' watch paths into tracker
// hints. fsnotify drops events and is not recursive, so this only hints:
// the tracker's periodic pass stays the truth. The watch list is refreshed
// periodically because adapters learn new directories (new projects).
func watchAdapters(ctx context.Context, ads []adapters.Adapter, tr *tracker.Tracker, extra <-chan struct{}, log *zap.Logger) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		log.Warn("file change hints unavailable; relying on periodic passes", zap.Error(err))
		w = nil
	}
	watchLoop(ctx, w, ads, tr, extra, log)
}

// watchLoop is watchAdapters with its watcher given (nil: none). The
// watcher may end (closed, or its reader stopped on an error); the loop
// does not: SIGHUP rescans (extra) must outlive it, and matter more once
// no file change hints arrive.
func watchLoop(ctx context.Context, w *fsnotify.Watcher, ads []adapters.Adapter, tr *tracker.Tracker, extra <-chan struct{}, log *zap.Logger) {
	if w != nil {
		defer w.Close()
	}
	watched := map[string]bool{}
	sync := func() {
		if w == nil {
			return
		}
		syncWatches(w, watched, ads, log)
	}
	sync()
	refresh := time.NewTicker(30 * time.Second)
	defer refresh.Stop()
	var events <-chan fsnotify.Event
	var errs <-chan error
	if w != nil {
		events, errs = w.Events, w.Errors
	}
	// lost drops the ended watcher: its nil channels block forever, so only
	// ctx, the refresh (a no-op now) and SIGHUP remain. Events may have been
	// lost on the way, so everything is rescanned once.
	lost := func() {
		log.Warn("file watcher ended; relying on periodic passes (SIGHUP still rescans)")
		events, errs = nil, nil
		w.Close()
		w = nil
		rescanAll(ads)
		tr.Hint()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-refresh.C:
			sync()
		case ev, ok := <-events:
			if !ok {
				lost()
				continue
			}
			if ev.Has(fsnotify.Create) {
				// A new directory (project) may need a watch of its own.
				sync()
			}
			if meansNewData(ev) {
				tr.Hint()
			}
		case err, ok := <-errs:
			if !ok {
				lost()
				continue
			}
			// Overflow or a watcher error: events were lost, so incremental
			// adapters must look at everything again, now.
			log.Warn("file watcher error; rescanning everything", zap.Error(err))
			rescanAll(ads)
			tr.Hint()
		case <-extra:
			log.Info("full rescan requested")
			rescanAll(ads)
			tr.Hint()
		}
	}
}

// meansNewData reports whether a change may show something a pass would
// read. Two kinds of events never do, and both are what sessiond's own
// reads cause: a change of attributes only (SQLite sets the mode of the
// -wal and -shm files each time it opens a database), and a write to a
// SQLite -shm file, the shared index every reader of a WAL database
// writes to (a reader opening it alone rebuilds it). Taken as hints, the
// pass reading OpenCode's database caused the next one, every debounce,
// for as long as the daemon ran. OpenCode's own writes go to the -wal
// file and the database.
func meansNewData(ev fsnotify.Event) bool {
	if ev.Op == fsnotify.Chmod {
		return false
	}
	return !strings.HasSuffix(ev.Name, "-shm")
}

// syncWatches makes w watch the adapters' watch paths now, at most
// maxWatches of them: it adds the new ones and removes those no adapter
// names any more. watched is what w watches, kept up to date.
func syncWatches(w *fsnotify.Watcher, watched map[string]bool, ads []adapters.Adapter, log *zap.Logger) {
	want := map[string]bool{}
	for _, a := range ads {
		for _, p := range a.WatchPaths() {
			if len(want) >= maxWatches {
				break
			}
			want[p] = true
		}
	}
	for p := range want {
		if watched[p] {
			continue
		}
		if err := w.Add(p); err != nil {
			log.Debug("cannot watch directory", zap.String("path", p), zap.Error(err))
			continue
		}
		watched[p] = true
	}
	for p := range watched {
		if !want[p] {
			_ = w.Remove(p)
			delete(watched, p)
		}
	}
}

// rescanAll makes every incremental adapter look at all its data on its
// next pass.
func rescanAll(ads []adapters.Adapter) {
	for _, a := range ads {
		if r, ok := a.(adapters.Rescanner); ok {
			r.RequestRescan()
		}
	}
}
