// Package sshtest runs a real OpenSSH server on a high port of localhost
// for a test, with a temporary host key and an authorized key of its own,
// and gives the ssh command that reaches it: sessionctl --host ssh://
// is tested through the system's ssh and sshd, as users run it.
package sshtest

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/lib/tailbuf"
)

// Server is a running sshd.
type Server struct {
	Port int
	// Command is an ssh command line that reaches the server with the
	// test's key and known hosts (for SESSIOND_SSH_COMMAND); it reads no
	// ~/.ssh of the real user.
	Command string
	// User is the login: the user the test runs as.
	User string

	env  []string
	dir  string
	cmd  *exec.Cmd
	log  *tailbuf.Buffer
	done chan struct{}
}

// Start starts sshd or skips the test when OpenSSH's server or client
// is not installed (.ci/run installs both). env, NAME=value each, is set
// in every session over what sshd sets itself (sshd_config's SetEnv):
// HOME=dir makes dir the far user's home, so a test never uses the real
// one.
func Start(t testing.TB, env ...string) *Server {
	t.Helper()
	sshd := "/usr/sbin/sshd"
	if _, err := os.Stat(sshd); err != nil {
		if p, err := exec.LookPath("sshd"); err == nil {
			sshd = p
		} else {
			t.Skip("sshd not installed (apt-get install openssh-server; .ci/run does): --host ssh:// not tested")
		}
	}
	for _, tool := range []string{"ssh", "ssh-keygen"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: --host ssh:// not tested", tool)
		}
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// sshd's privilege separation needs its empty directory.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir, err := os.MkdirTemp("/tmp", "sdssh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := func(name string) string { return filepath.Join(dir, name) }
	keygen := func(path string) {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sessiond-test", "-f", path).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v: %s", err, out)
		}
	}
	keygen(p("host_key"))
	keygen(p("id"))
	pub, err := os.ReadFile(p("id.pub"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p("authorized_keys"), pub, 0o600); err != nil {
		t.Fatal(err)
	}
	hostPub, err := os.ReadFile(p("host_key.pub"))
	if err != nil {
		t.Fatal(err)
	}
	hostKey := strings.Fields(string(hostPub))
	s := &Server{Command: "ssh -F " + p("ssh_config"), User: u.Username, env: env, dir: dir, log: &tailbuf.Buffer{Max: 1 << 20}}
	client := strings.Join([]string{
		"Host *",
		"  IdentityFile " + p("id"),
		"  IdentitiesOnly yes",
		"  UserKnownHostsFile " + p("known_hosts"),
		"  GlobalKnownHostsFile /dev/null",
		"  StrictHostKeyChecking yes",
		"  BatchMode yes",
		"  LogLevel ERROR",
		"",
	}, "\n")
	if err := os.WriteFile(p("ssh_config"), []byte(client), 0o600); err != nil {
		t.Fatal(err)
	}
	// A free port is only free until sshd binds it: another test may
	// take it first, so a start that fails is tried again on another.
	var startErr error
	for try := 0; try < 5; try++ {
		s.Port = freePort(t)
		if err := s.writeConfig(u.Username, hostKey); err != nil {
			t.Fatal(err)
		}
		if startErr = s.start(sshd); startErr == nil {
			break
		}
	}
	if startErr != nil {
		t.Fatal(startErr)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("sshd log:\n%s", s.log.String())
		}
	})
	return s
}

// writeConfig writes sshd's config and the client's known hosts for
// s.Port.
func (s *Server) writeConfig(user string, hostKey []string) error {
	p := func(name string) string { return filepath.Join(s.dir, name) }
	port := s.Port
	known := fmt.Sprintf("[localhost]:%d %s %s\n[127.0.0.1]:%d %s %s\n", port, hostKey[0], hostKey[1], port, hostKey[0], hostKey[1])
	if err := os.WriteFile(p("known_hosts"), []byte(known), 0o600); err != nil {
		return err
	}
	conf := strings.Join([]string{
		"Port " + strconv.Itoa(port),
		"ListenAddress 127.0.0.1",
		"HostKey " + p("host_key"),
		"PidFile " + p("sshd.pid"),
		"AuthorizedKeysFile " + p("authorized_keys"),
		"StrictModes no",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"UsePAM no",
		"PermitRootLogin prohibit-password",
		"AllowUsers " + user,
		"LogLevel VERBOSE",
		"",
	}, "\n")
	for _, kv := range s.env {
		conf += "SetEnv " + strconv.Quote(kv) + "\n"
	}
	return os.WriteFile(p("sshd_config"), []byte(conf), 0o600)
}

func (s *Server) start(sshd string) error {
	// -D: no daemon; -e: log to stderr.
	s.cmd = exec.Command(sshd, "-D", "-e", "-f", filepath.Join(s.dir, "sshd_config"))
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.done = make(chan struct{})
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start sshd: %w", err)
	}
	done := s.done
	go func() { s.cmd.Wait(); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return fmt.Errorf("sshd exited at start:\n%s", s.log.String())
		default:
		}
		// Ours answers with an SSH banner (a listener someone else has
		// on the port would not, or not ours: sshd then exits, above).
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(s.Port), time.Second)
		if err == nil {
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			banner := make([]byte, 8)
			n, _ := io.ReadFull(c, banner)
			c.Close()
			if strings.HasPrefix(string(banner[:n]), "SSH-2.0") {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.cmd.Process.Kill()
	<-s.done
	return fmt.Errorf("sshd not listening on %d after 10s:\n%s", s.Port, s.log.String())
}

// URL is the ssh:// host of the server with the socket path on its side.
func (s *Server) URL(socket string) string {
	return fmt.Sprintf("ssh://%s@localhost:%d%s", s.User, s.Port, socket)
}

// Stop kills sshd and every session it serves, as a crash of the host
// would.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	// The per-connection sshd processes it forked (and theirs) would
	// outlive it: end them first, as a crash of the host would.
	killDescendantsOf(s.cmd.Process.Pid)
	select {
	case <-s.done:
	default:
		s.cmd.Process.Kill()
		<-s.done
	}
}

// Log is what sshd wrote.
func (s *Server) Log() string { return s.log.String() }

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// killDescendantsOf kills every process below pid: the per-connection
// sshd (which calls setsid, but keeps its parent) and what it started.
func killDescendantsOf(pid int) {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		st := string(stat)
		i := strings.LastIndexByte(st, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(st[i+1:])
		if len(f) > 1 {
			if ppid, err := strconv.Atoi(f[1]); err == nil {
				children[ppid] = append(children[ppid], n)
			}
		}
	}
	var kill func(int)
	kill = func(p int) {
		for _, c := range children[p] {
			if proc, err := os.FindProcess(c); err == nil {
				proc.Kill()
			}
			kill(c)
		}
	}
	kill(pid)
}
