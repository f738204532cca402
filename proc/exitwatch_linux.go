package proc

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// sysWatcher waits for pidfds to become readable (the process exited) with
// one epoll set. An eventfd in the same set wakes the loop for Close.
type sysWatcher struct {
	epfd int
	evfd int
}

func newSysWatcher() (*sysWatcher, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(evfd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &ev); err != nil {
		unix.Close(evfd)
		unix.Close(epfd)
		return nil, fmt.Errorf("epoll_ctl add eventfd %d: %w", evfd, err)
	}
	return &sysWatcher{epfd: epfd, evfd: evfd}, nil
}

// arm opens a pidfd for pid. It fails with ESRCH when pid does not exist,
// and with ENOSYS or EPERM where pidfd_open is missing or filtered.
func (s *sysWatcher) arm(pid int) (int, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	return fd, nil
}

// enable adds the pidfd to the epoll set. gen rides in the event data so a
// stale event for a closed and reused fd number is recognised.
func (s *sysWatcher) enable(fd int, gen uint32) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd), Pad: int32(gen)}
	if err := unix.EpollCtl(s.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl add pidfd %d: %w", fd, err)
	}
	return nil
}

// disarm removes and closes the pidfd (pidfds are never shared).
func (s *sysWatcher) disarm(fd int, _ bool) error {
	err := unix.EpollCtl(s.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	if errors.Is(err, unix.ENOENT) {
		err = nil // armed but never enabled
	}
	if cerr := unix.Close(fd); cerr != nil && err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("release pidfd %d: %w", fd, err)
	}
	return nil
}

// run waits until wake is called, calling fire for every pidfd that became
// readable.
func (s *sysWatcher) run(fire func(token int, gen uint32, reason string)) error {
	evs := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(s.epfd, evs, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("epoll_wait %d: %w", s.epfd, err)
		}
		for i := range evs[:n] {
			if int(evs[i].Fd) == s.evfd {
				return nil
			}
			fire(int(evs[i].Fd), uint32(evs[i].Pad), "pidfd")
		}
	}
}

// wake makes run return.
func (s *sysWatcher) wake() error {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], 1)
	if _, err := unix.Write(s.evfd, b[:]); err != nil {
		return fmt.Errorf("wake eventfd %d: %w", s.evfd, err)
	}
	return nil
}

// close releases the epoll set and the eventfd; call it after run returned.
func (s *sysWatcher) close() error {
	return errors.Join(unix.Close(s.epfd), unix.Close(s.evfd))
}
