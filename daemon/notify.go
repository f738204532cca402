package daemon

import (
	"net"
	"os"
	"strconv"
	"time"
)

// notifier speaks systemd's sd_notify protocol: one datagram per state
// change to $NOTIFY_SOCKET. No library: it is a few lines.
// See https://www.freedesktop.org/software/systemd/man/sd_notify.html.
type notifier struct {
	path string
	// watchdog is half of $WATCHDOG_USEC when systemd asked for pings.
	watchdog time.Duration
}

func newNotifier() *notifier {
	n := &notifier{path: os.Getenv("NOTIFY_SOCKET")}
	if us, err := strconv.ParseInt(os.Getenv("WATCHDOG_USEC"), 10, 64); err == nil && us > 0 {
		if pid, err := strconv.Atoi(os.Getenv("WATCHDOG_PID")); err != nil || pid == os.Getpid() {
			n.watchdog = time.Duration(us) * time.Microsecond / 2
		}
	}
	return n
}

// send delivers one state string; without $NOTIFY_SOCKET it does nothing.
func (n *notifier) send(state string) error {
	if n.path == "" {
		return nil
	}
	name := n.path
	if name[0] == '@' { // abstract socket
		name = "\x00" + name[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.Write([]byte(state))
	return err
}
