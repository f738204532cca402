package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sessiond/sessiond/lib/shell"
	"github.com/sessiond/sessiond/lib/tailbuf"
)

// A Host is where a sessiond runs, as sessionctl --host names it:
//
//	unix:///path/to/socket                 a socket on this machine
//	ssh://[user@]host[:port][/path]        a sessiond on another machine,
//	                                       reached through the system ssh
//	ssh://[user@]host[:port]/~/path        the same, its socket under the
//	                                       far user's home
//
// Over ssh, the client runs `ssh … sessionctl dial-stdio [--socket path]`
// and speaks the same HTTP API through that command's stdin and stdout,
// as DOCKER_HOST=ssh:// does: ssh's own keys, agent and ~/.ssh/config do
// the rest, and nothing of sessiond listens on a network.
type Host struct {
	// Name is the host as given (the HOST column of merged listings).
	Name string
	// Socket is the socket's path: for unix, the local one; for ssh, the
	// far side's ("" = the far sessionctl's default; "~/…" under the far
	// user's home, for the far side's shell to expand).
	Socket string
	// ssh is set for an ssh host.
	ssh *sshTarget
}

// sshTarget is the ssh side of a Host.
type sshTarget struct {
	User, Host string
	Port       int // 0 = ssh's default (or its config's)
}

// ParseHost parses a --host value. A bare path is taken as a unix socket.
func ParseHost(s string) (Host, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Host{}, errors.New("empty host")
	}
	if strings.HasPrefix(s, "/") {
		return Host{Name: "unix://" + s, Socket: s}, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return Host{}, fmt.Errorf("host %q: %w", s, err)
	}
	switch u.Scheme {
	case "unix":
		p := u.Path
		if u.Host != "" || p == "" {
			return Host{}, fmt.Errorf("host %q: a unix host is unix:///absolute/path/to/socket", s)
		}
		return Host{Name: s, Socket: p}, nil
	case "ssh":
		if u.Hostname() == "" {
			return Host{}, fmt.Errorf("host %q: no host name (ssh://[user@]host[:port][/path-to-socket])", s)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return Host{}, fmt.Errorf("host %q: ssh hosts take no query or fragment", s)
		}
		t := &sshTarget{Host: u.Hostname(), User: u.User.Username()}
		if _, hasPass := u.User.Password(); hasPass {
			return Host{}, fmt.Errorf("host %q: no password in the URL; ssh's keys or agent authenticate", s)
		}
		if p := u.Port(); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil || n <= 0 || n > 65535 {
				return Host{}, fmt.Errorf("host %q: port %q is not a port number", s, p)
			}
			t.Port = n
		}
		sock := u.Path
		switch {
		case sock == "/":
			sock = ""
		case sock == "/~" || sock == "/~/":
			return Host{}, fmt.Errorf("host %q: ~ is the far home, not a socket (ssh://host/~/path/to/socket)", s)
		case strings.HasPrefix(sock, "/~/"):
			// A URL's path always begins with "/": "/~/x" is read as the far
			// user's ~/x, left for the far shell to expand (the local one
			// never sees it: ssh is run without a shell, or with the words
			// as "$@"). An absolute path that starts with a directory named
			// ~ is still ssh://host//~/x.
			sock = sock[1:]
		}
		return Host{Name: s, Socket: sock, ssh: t}, nil
	case "":
		return Host{}, fmt.Errorf("host %q: say unix:///path or ssh://[user@]host[:port][/path]", s)
	}
	return Host{}, fmt.Errorf("host %q: unknown scheme %q (unix or ssh)", s, u.Scheme)
}

// ParseHosts parses a comma-separated list (SESSIOND_HOST).
func ParseHosts(list string) ([]Host, error) {
	var out []Host
	for _, s := range strings.Split(list, ",") {
		if strings.TrimSpace(s) == "" {
			continue
		}
		h, err := ParseHost(s)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

// Environment of the ssh transport, read when a connection is made.
const (
	// EnvSSHCommand replaces "ssh" (run by sh, as GIT_SSH_COMMAND is):
	// `SESSIOND_SSH_COMMAND="ssh -F ~/.ssh/sessiond_config"`.
	EnvSSHCommand = "SESSIOND_SSH_COMMAND"
	// EnvRemoteSessionctl is the sessionctl run on the far side when it
	// is not on that side's PATH for non-interactive logins.
	EnvRemoteSessionctl = "SESSIOND_REMOTE_SESSIONCTL"
)

// NewHostClient returns a client for h.
func NewHostClient(h Host) *Client {
	if h.ssh == nil {
		c := NewClient(h.Socket)
		c.Host = h.Name
		return c
	}
	c := newClient(func(ctx context.Context) (net.Conn, error) { return dialSSH(ctx, h) })
	c.Host, c.Socket, c.remote = h.Name, h.Socket, true
	return c
}

// sshArgv is the command that carries h's API: ssh (or
// SESSIOND_SSH_COMMAND) with the far side's sessionctl dial-stdio.
func sshArgv(h Host) []string {
	remote := os.Getenv(EnvRemoteSessionctl)
	if remote == "" {
		remote = "sessionctl"
	}
	far := []string{remote, "dial-stdio"}
	if h.Socket != "" {
		far = append(far, "--socket", h.Socket)
	}
	var args []string
	// -T: no terminal (the channel carries bytes); BatchMode off, so a
	// key's passphrase may still be asked on the terminal. A host that
	// goes silent is given up after 3 unanswered keepalives 15 s apart.
	args = append(args, "-T", "-o", "ConnectTimeout=15", "-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=3")
	if h.ssh.Port != 0 {
		args = append(args, "-p", strconv.Itoa(h.ssh.Port))
	}
	if h.ssh.User != "" {
		args = append(args, "-l", h.ssh.User)
	}
	args = append(args, "--", h.ssh.Host)
	// The far side's shell splits the command line: quote each word, but
	// a leading ~/ (the far sessionctl, the socket), which that shell
	// expands to the far user's home.
	for _, w := range far {
		if rest, ok := strings.CutPrefix(w, "~/"); ok {
			args = append(args, "~/"+shell.Quote(rest))
			continue
		}
		args = append(args, shell.Quote(w))
	}
	if cmd := os.Getenv(EnvSSHCommand); strings.TrimSpace(cmd) != "" {
		return append([]string{"sh", "-c", cmd + ` "$@"`, "ssh"}, args...)
	}
	return append([]string{"ssh"}, args...)
}

// HostError says why a host could not be reached through ssh: ssh's exit
// status and the last line it (or the far sessionctl) wrote on stderr.
type HostError struct {
	Host     string
	ExitCode int // -1 when ssh did not exit (killed, or could not start)
	Stderr   string
	Err      error
}

func (e *HostError) Error() string {
	var why string
	switch {
	case e.ExitCode == 127:
		// The far shell's "command not found" (127 in POSIX shells, for a
		// missing name or path alike). Matching stderr's words instead
		// would also catch the far sessionctl's own errors, which begin
		// "sessionctl:".
		why = "sessionctl not found on the host (install it there, or set " + EnvRemoteSessionctl + " to its path)"
		if e.Stderr != "" {
			why += ": " + e.Stderr
		}
	case e.Stderr != "" && e.ExitCode >= 0:
		why = fmt.Sprintf("ssh exited with status %d: %s", e.ExitCode, e.Stderr)
	case e.ExitCode >= 0:
		why = fmt.Sprintf("ssh exited with status %d", e.ExitCode)
	case e.Err != nil && e.Stderr != "":
		why = fmt.Sprintf("%v: %s", e.Err, e.Stderr)
	case e.Err != nil:
		why = e.Err.Error()
	default:
		why = "the connection ended"
	}
	return fmt.Sprintf("host %s: %s", e.Host, why)
}

func (e *HostError) Unwrap() error { return e.Err }

// sshConn is an ssh process's stdin and stdout as a net.Conn. A read
// that finds the process gone returns a *HostError saying why.
type sshConn struct {
	host   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *os.File // the read end of a pipe this conn owns: exec's Wait never closes it under a Read
	stderr *tailbuf.Buffer

	once   sync.Once
	exited chan struct{}
	err    *HostError // set before exited is closed
}

func dialSSH(ctx context.Context, h Host) (net.Conn, error) {
	argv := sshArgv(h)
	// Not CommandContext: the connection outlives the dial's context
	// (the transport keeps it for later requests); Close ends it.
	cmd := exec.Command(argv[0], argv[1:]...)
	c := &sshConn{host: h.Name, cmd: cmd, stderr: &tailbuf.Buffer{Max: 4096}, exited: make(chan struct{})}
	var err error
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	// Not StdoutPipe: Wait would close it as soon as ssh exits, dropping
	// what is still in the pipe under a Read that has not taken it yet.
	r, w, err := os.Pipe()
	if err != nil {
		c.stdin.Close()
		return nil, err
	}
	c.stdout, cmd.Stdout = r, w
	cmd.Stderr = c.stderr
	err = cmd.Start()
	w.Close() // ssh holds its own copy; the read end sees EOF when it exits
	if err != nil {
		r.Close()
		c.stdin.Close()
		return nil, &HostError{Host: h.Name, ExitCode: -1, Err: fmt.Errorf("start %s: %w", argv[0], err)}
	}
	go func() {
		werr := cmd.Wait()
		he := &HostError{Host: h.Name, ExitCode: -1, Stderr: c.stderr.LastLine()}
		var ee *exec.ExitError
		switch {
		case errors.As(werr, &ee) && ee.ExitCode() >= 0:
			he.ExitCode = ee.ExitCode()
		case werr == nil:
			he.ExitCode = 0
		default:
			he.Err = werr
		}
		c.err = he
		close(c.exited)
	}()
	if ctx.Err() != nil {
		c.Close()
		return nil, ctx.Err()
	}
	return c, nil
}

func (c *sshConn) Read(p []byte) (int, error) {
	n, err := c.stdout.Read(p)
	if err != nil && n == 0 {
		// The process's output ended: say why, once it has exited (its
		// stderr is complete then). A process that closed its output
		// and lives on is ended here.
		select {
		case <-c.exited:
		case <-time.After(2 * time.Second):
			c.kill()
			<-c.exited
		}
		if c.err.ExitCode == 0 {
			return 0, io.EOF // the far side closed the connection
		}
		return 0, c.err
	}
	return n, nil
}

func (c *sshConn) Write(p []byte) (int, error) {
	n, err := c.stdin.Write(p)
	if err != nil {
		// ssh is gone or going: say why, as Read does.
		select {
		case <-c.exited:
			return n, c.err
		case <-time.After(2 * time.Second):
		}
	}
	return n, err
}

func (c *sshConn) kill() {
	if c.cmd.Process != nil {
		_ = c.cmd.Process.Kill()
	}
}

// Close ends the ssh process: its stdin closes (the far dial-stdio then
// ends), and it is killed if it has not exited shortly after.
func (c *sshConn) Close() error {
	c.once.Do(func() {
		c.stdin.Close()
		select {
		case <-c.exited:
		case <-time.After(time.Second):
			c.kill()
			<-c.exited
		}
		c.stdout.Close()
	})
	return nil
}

func (c *sshConn) LocalAddr() net.Addr              { return sshAddr(c.host) }
func (c *sshConn) RemoteAddr() net.Addr             { return sshAddr(c.host) }
func (c *sshConn) SetDeadline(time.Time) error      { return nil }
func (c *sshConn) SetReadDeadline(time.Time) error  { return nil }
func (c *sshConn) SetWriteDeadline(time.Time) error { return nil }

type sshAddr string

func (a sshAddr) Network() string { return "ssh" }
func (a sshAddr) String() string  { return string(a) }
