//go:build linux

package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
// It is 100 on every Linux architecture Go supports.
const clockTicks = 100

// readProcessStats reads a process's figures from /proc: the kernel's own
// accounting, so the measured process needs no instrumentation.
func readProcessStats(pid int) (processStats, error) {
	var s processStats
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	st, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(st), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseUint(f[0], 10, 64)
		switch k {
		case "VmRSS":
			s.RSS = n << 10
		case "VmHWM":
			s.PeakRSS = n << 10
		case "RssAnon":
			s.RSSAnon = n << 10
		case "RssFile":
			s.RSSFile = n << 10
		case "Threads":
			s.Threads = int(n)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return s, err
	}
	// Fields after the last ')': state is field 3, utime 14, stime 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return s, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return s, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(f))
	}
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	stt, _ := strconv.ParseUint(f[12], 10, 64)
	s.CPUSeconds = float64(ut+stt) / clockTicks
	if io, err := os.ReadFile(filepath.Join(dir, "io")); err == nil {
		for _, line := range strings.Split(string(io), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			switch k {
			case "rchar":
				s.ReadChars = n
			case "read_bytes":
				s.ReadBytes = n
			case "syscr":
				s.ReadCalls = n
			}
		}
		s.HaveIO = true
	}
	// Run-queue wait: time the process's threads were ready to run but
	// waited for a CPU (field 2 of each thread's schedstat, ns). It tells
	// a slow daemon from a busy machine.
	if tasks, err := os.ReadDir(filepath.Join(dir, "task")); err == nil {
		for _, t := range tasks {
			b, err := os.ReadFile(filepath.Join(dir, "task", t.Name(), "schedstat"))
			if err != nil {
				continue
			}
			if f := strings.Fields(string(b)); len(f) >= 2 {
				ns, _ := strconv.ParseUint(f[1], 10, 64)
				s.RunQueueWait += time.Duration(ns)
			}
		}
	}
	fds, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		return s, err
	}
	s.FDs = len(fds)
	return s, nil
}

// dropCaches empties the page cache (root only), for a discovery from a
// cold disk rather than from memory.
func dropCaches() error {
	syscall.Sync()
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o200)
}

// accessWatch counts read(2) calls and opens of the files directly inside
// some directories, with inotify (IN_ACCESS, IN_OPEN), whoever makes them.
// It tells from outside the daemon whether a steady pass reads transcripts.
type accessWatch struct {
	f       *os.File
	dir     string // the first watched directory, where Stop drops its marker
	reads   map[string]int
	opens   map[string]int
	done    chan struct{}
	drained chan struct{} // closed when the loop sees the marker's open
}

// drainMarker is the file Stop opens to learn the loop has taken every
// event before it: inotify delivers a watch's events in order.
const drainMarker = ".sessiond-bench-drain"

// watchAccess starts watching dirs.
func watchAccess(dirs []string) (*accessWatch, error) {
	// Non-blocking, so os.File puts it in the runtime's poller and Close
	// wakes the reading goroutine.
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	for _, d := range dirs {
		if _, err := syscall.InotifyAddWatch(fd, d, syscall.IN_ACCESS|syscall.IN_OPEN); err != nil {
			syscall.Close(fd)
			return nil, fmt.Errorf("watch %s: %w", d, err)
		}
	}
	if len(dirs) == 0 {
		syscall.Close(fd)
		return nil, fmt.Errorf("watch: no directories")
	}
	w := &accessWatch{f: os.NewFile(uintptr(fd), "inotify"), dir: dirs[0], reads: map[string]int{}, opens: map[string]int{},
		done: make(chan struct{}), drained: make(chan struct{})}
	go w.loop()
	return w, nil
}

func (w *accessWatch) loop() {
	defer close(w.done)
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil || n <= 0 {
			return
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := ""
			if ev.Len > 0 {
				nb := buf[off+syscall.SizeofInotifyEvent : off+syscall.SizeofInotifyEvent+int(ev.Len)]
				name = string(bytes.TrimRight(nb, "\x00"))
			}
			off += syscall.SizeofInotifyEvent + int(ev.Len)
			// Only files inside the watched directories: a directory's own
			// listing (getdents) is an access too, and not a read of data.
			if name == "" || ev.Mask&syscall.IN_ISDIR != 0 || ev.Mask&syscall.IN_IGNORED != 0 {
				continue
			}
			if name == drainMarker {
				if ev.Mask&syscall.IN_OPEN != 0 && ev.Wd == 1 {
					select {
					case <-w.drained:
					default:
						close(w.drained)
					}
				}
				continue
			}
			if ev.Mask&syscall.IN_ACCESS != 0 {
				w.reads[name]++
			}
			if ev.Mask&syscall.IN_OPEN != 0 {
				w.opens[name]++
			}
		}
	}
}

// Stop ends the watch and returns the read(2) calls and opens per file name.
func (w *accessWatch) Stop() (reads, opens map[string]int) {
	// Every event queued before the marker's open is read once the loop
	// sees that open; only then may the watch close. The wait is bounded
	// in case the directory is gone.
	marker := filepath.Join(w.dir, drainMarker)
	if f, err := os.Create(marker); err == nil {
		f.Close()
		select {
		case <-w.drained:
		case <-time.After(10 * time.Second):
		}
		os.Remove(marker)
	}
	w.f.Close()
	<-w.done
	return w.reads, w.opens
}

// Supported reports whether this platform has the /proc figures.
const Supported = true

// dieWithParent makes cmd's process get SIGKILL when the benchmark dies,
// so a killed benchmark leaves no daemon or owner behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// LoadAverage is the 1-minute load average (/proc/loadavg): figures taken
// on a busy machine are slower than the daemon is.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
