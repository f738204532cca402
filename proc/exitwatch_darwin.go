package proc

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// sysWatcher waits for EVFILT_PROC/NOTE_EXIT events on one kqueue. An
// EVFILT_USER event wakes the loop for Close. kqueue watches by pid, so the
// token is the pid itself.
type sysWatcher struct {
	kq int
}

// wakeIdent is the EVFILT_USER identifier used to stop the loop.
const wakeIdent = 0

func newSysWatcher() (*sysWatcher, error) {
	kq, err := unix.Kqueue()
	if err != nil {
		return nil, fmt.Errorf("kqueue: %w", err)
	}
	unix.CloseOnExec(kq)
	var ev unix.Kevent_t
	unix.SetKevent(&ev, wakeIdent, unix.EVFILT_USER, unix.EV_ADD|unix.EV_CLEAR)
	if _, err := unix.Kevent(kq, []unix.Kevent_t{ev}, nil, nil); err != nil {
		unix.Close(kq)
		return nil, fmt.Errorf("kevent add EVFILT_USER on kqueue %d: %w", kq, err)
	}
	return &sysWatcher{kq: kq}, nil
}

// arm registers NOTE_EXIT for pid. It fails with ESRCH when pid does not
// exist. Events may fire as soon as it returns.
func (s *sysWatcher) arm(pid int) (int, error) {
	var ev unix.Kevent_t
	unix.SetKevent(&ev, pid, unix.EVFILT_PROC, unix.EV_ADD|unix.EV_ONESHOT)
	ev.Fflags = unix.NOTE_EXIT
	if _, err := unix.Kevent(s.kq, []unix.Kevent_t{ev}, nil, nil); err != nil {
		return -1, fmt.Errorf("kevent add NOTE_EXIT for pid %d: %w", pid, err)
	}
	return pid, nil
}

// enable is a no-op: arm already registered the event.
func (s *sysWatcher) enable(int, uint32) error { return nil }

// disarm deletes the registration unless another watch still needs it.
func (s *sysWatcher) disarm(pid int, shared bool) error {
	if shared {
		return nil
	}
	var ev unix.Kevent_t
	unix.SetKevent(&ev, pid, unix.EVFILT_PROC, unix.EV_DELETE)
	_, err := unix.Kevent(s.kq, []unix.Kevent_t{ev}, nil, nil)
	if err == nil || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
		return nil // a oneshot that fired is already gone
	}
	return fmt.Errorf("kevent delete NOTE_EXIT for pid %d: %w", pid, err)
}

// run waits until wake is called, calling fire for every exited pid.
func (s *sysWatcher) run(fire func(token int, gen uint32, reason string)) error {
	evs := make([]unix.Kevent_t, 64)
	for {
		n, err := unix.Kevent(s.kq, nil, evs, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("kevent wait on kqueue %d: %w", s.kq, err)
		}
		for i := range evs[:n] {
			ev := &evs[i]
			switch {
			case ev.Filter == unix.EVFILT_USER:
				return nil
			case ev.Filter == unix.EVFILT_PROC && ev.Fflags&unix.NOTE_EXIT != 0:
				fire(int(ev.Ident), 0, "kqueue")
			}
		}
	}
}

// wake makes run return.
func (s *sysWatcher) wake() error {
	var ev unix.Kevent_t
	unix.SetKevent(&ev, wakeIdent, unix.EVFILT_USER, 0)
	ev.Fflags = unix.NOTE_TRIGGER
	if _, err := unix.Kevent(s.kq, []unix.Kevent_t{ev}, nil, nil); err != nil {
		return fmt.Errorf("wake kqueue %d: %w", s.kq, err)
	}
	return nil
}

// close releases the kqueue; call it after run returned.
func (s *sysWatcher) close() error {
	if err := unix.Close(s.kq); err != nil {
		return fmt.Errorf("close kqueue %d: %w", s.kq, err)
	}
	return nil
}
