package tracker

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
)

// defaultCheckpointEvery is how often, at most, what the adapters learned
// is saved while the daemon runs. Saving costs a store commit (an fsync);
// losing the last interval to a crash costs only the re-read of the inputs
// that changed in it.
const defaultCheckpointEvery = 10 * time.Second

// restore hands a, when it is an adapters.Checkpointer, what the store
// saved for it. A store that cannot be read costs every input one read,
// nothing more. The first pass calls it on a goroutine per adapter,
// before that adapter's first Discover: the adapters' restores then
// overlap each other, the loading of the records and the reading of the
// process table.
func (t *Tracker) restore(a adapters.Adapter) {
	c, ok := a.(adapters.Checkpointer)
	if !ok {
		return
	}
	saved, err := t.cfg.Store.AdapterState(a.Name())
	if err != nil {
		t.log.Warn("cannot read what the adapter saved; it reads every input again", zap.String("adapter", a.Name()), zap.Error(err))
		return
	}
	c.Restore(saved)
}

// checkpoint saves in the store what each adapter learned since its last
// checkpoint (see adapters.Checkpointer). Run calls it after the startup
// pass, every CheckpointEvery while passes run, and once more when it
// stops.
func (t *Tracker) checkpoint() error {
	t.cpMu.Lock()
	defer t.cpMu.Unlock()
	var errs []error
	for _, a := range t.cfg.Adapters {
		c, ok := a.(adapters.Checkpointer)
		if !ok {
			continue
		}
		start := time.Now()
		cp := c.Checkpoint()
		if len(cp.Put) == 0 && len(cp.Del) == 0 {
			continue
		}
		if err := t.cfg.Store.SaveAdapterState(a.Name(), cp.Put, cp.Del); err != nil {
			errs = append(errs, fmt.Errorf("adapter %s: %w", a.Name(), err))
			continue
		}
		cp.Commit()
		t.log.Debug("checkpoint", zap.String("adapter", a.Name()), zap.Int("saved", len(cp.Put)),
			zap.Int("dropped", len(cp.Del)), zap.Duration("took", time.Since(start)))
	}
	t.statsMu.Lock()
	t.stats.Checkpoints++
	if len(errs) > 0 {
		t.stats.CheckpointErrors++
	}
	t.statsMu.Unlock()
	return errors.Join(errs...)
}

// checkpointIfDue runs Checkpoint when the last one is older than
// CheckpointEvery, logging a failure (the next one retries).
func (t *Tracker) checkpointIfDue(last *time.Time, force bool) {
	now := time.Now()
	if !force && now.Sub(*last) < t.cfg.CheckpointEvery {
		return
	}
	*last = now
	if err := t.checkpoint(); err != nil {
		t.log.Warn("cannot save what the adapters learned; a restart will read those inputs again", zap.Error(err))
	}
}
