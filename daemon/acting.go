package daemon

import (
	"context"
	"fmt"
	"sync"
)

// actionLocks lets one action at a time act on a session: a send's check
// and typing, a stop, a reap, a repair or an abort, whether it came from
// the API, the send queue or an auto-repair policy. Two prompts typed into
// one pane at once interleave or land on top of each other; a repair
// beside a resume, or a reap beside a stop, each check a state the other
// is changing. Each action re-reads what it acts on once it holds the
// lock, so what it checked is what it acts on.
type actionLocks struct {
	mu   sync.Mutex
	held map[string]*actionLock
}

// actionLock is one session's lock: a token channel (a mutex a waiter can
// give up on when its request ends) and how many hold or wait for it, so
// the map drops it when nobody does.
type actionLock struct {
	token chan struct{}
	users int
}

// lock waits until no other action acts on session id, or ctx ends. The
// returned func releases it; call it exactly once.
func (l *actionLocks) lock(ctx context.Context, id string) (unlock func(), err error) {
	l.mu.Lock()
	if l.held == nil {
		l.held = map[string]*actionLock{}
	}
	a := l.held[id]
	if a == nil {
		a = &actionLock{token: make(chan struct{}, 1)}
		l.held[id] = a
	}
	a.users++
	l.mu.Unlock()

	select {
	case a.token <- struct{}{}:
		return func() {
			<-a.token
			l.release(id, a)
		}, nil
	case <-ctx.Done():
		l.release(id, a)
		return nil, fmt.Errorf("another action on session %s is still running: %w", id, ctx.Err())
	}
}

func (l *actionLocks) release(id string, a *actionLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a.users--; a.users == 0 {
		delete(l.held, id)
	}
}

// busy reports how many sessions have an action running or waiting: a
// test's check that every lock was given back.
func (l *actionLocks) busy() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}
