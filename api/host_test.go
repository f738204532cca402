package api

import (
	"strings"
	"testing"
)

func TestParseHost(t *testing.T) {
	for _, tc := range []struct {
		in         string
		socket     string
		user, host string
		port       int
		err        string
	}{
		{in: "unix:///run/user/1000/sessiond/sessiond.sock", socket: "/run/user/1000/sessiond/sessiond.sock"},
		{in: "/tmp/s.sock", socket: "/tmp/s.sock"},
		{in: "ssh://box", host: "box"},
		{in: "ssh://me@box:2222/run/user/1000/sessiond/sessiond.sock", user: "me", host: "box", port: 2222, socket: "/run/user/1000/sessiond/sessiond.sock"},
		{in: "ssh://me@box/", user: "me", host: "box"},
		{in: "ssh://[::1]:22", host: "::1", port: 22},
		{in: "", err: "empty host"},
		{in: "box", err: "say unix:///path or ssh://"},
		{in: "tcp://box:1", err: "unknown scheme"},
		{in: "unix://relative", err: "unix:///absolute/path"},
		{in: "ssh://", err: "no host name"},
		{in: "ssh://box:0", err: "not a port number"},
		{in: "ssh://me:secret@box", err: "no password"},
		{in: "ssh://box?x=1", err: "no query"},
	} {
		h, err := ParseHost(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseHost(%q) = %+v, %v; want an error saying %q", tc.in, h, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseHost(%q): %v", tc.in, err)
			continue
		}
		if h.Socket != tc.socket {
			t.Errorf("ParseHost(%q).Socket = %q, want %q", tc.in, h.Socket, tc.socket)
		}
		if tc.host == "" {
			if h.SSH != nil {
				t.Errorf("ParseHost(%q) is an ssh host", tc.in)
			}
			continue
		}
		if h.SSH == nil || h.SSH.Host != tc.host || h.SSH.User != tc.user || h.SSH.Port != tc.port {
			t.Errorf("ParseHost(%q).SSH = %+v, want %s@%s:%d", tc.in, h.SSH, tc.user, tc.host, tc.port)
		}
	}
	hs, err := ParseHosts("ssh://a, ,unix:///s")
	if err != nil || len(hs) != 2 || hs[0].SSH == nil || hs[1].Socket != "/s" {
		t.Errorf("ParseHosts: %+v, %v", hs, err)
	}
}

// The far command is quoted for the far side's shell, and
// SESSIOND_SSH_COMMAND runs through sh as GIT_SSH_COMMAND does.
func TestSSHArgv(t *testing.T) {
	h, _ := ParseHost("ssh://me@box:2222/tmp/my dir/s.sock")
	t.Setenv(EnvSSHCommand, "")
	t.Setenv(EnvRemoteSessionctl, "")
	got := strings.Join(sshArgv(h), " ")
	want := "ssh -T -o ConnectTimeout=15 -o ServerAliveInterval=15 -o ServerAliveCountMax=3 -p 2222 -l me -- box sessionctl dial-stdio --socket '/tmp/my dir/s.sock'"
	if got != want {
		t.Errorf("argv:\n%s\nwant:\n%s", got, want)
	}
	t.Setenv(EnvSSHCommand, "ssh -F /x/config")
	t.Setenv(EnvRemoteSessionctl, "/opt/bin/sessionctl")
	argv := sshArgv(h)
	if argv[0] != "sh" || argv[2] != `ssh -F /x/config "$@"` || !strings.Contains(strings.Join(argv, " "), "/opt/bin/sessionctl dial-stdio") {
		t.Errorf("with %s: %q", EnvSSHCommand, argv)
	}
	t.Setenv(EnvRemoteSessionctl, "~/my bin/sessionctl")
	if got := strings.Join(sshArgv(h), " "); !strings.Contains(got, ` ~/'my bin/sessionctl' dial-stdio`) {
		t.Errorf("a far path under ~ keeps ~ unquoted: %s", got)
	}
	if q := shellQuote("it's"); q != `'it'\''s'` {
		t.Errorf("shellQuote: %s", q)
	}
}

// A missing far sessionctl is said as such; the far sessionctl's own
// error (which names sessionctl and may say "No such file or directory")
// is ssh's status and that line.
func TestHostErrorWords(t *testing.T) {
	missing := (&HostError{Host: "ssh://box", ExitCode: 127, Stderr: "bash: line 1: /opt/sessionctl: No such file or directory"}).Error()
	if !strings.Contains(missing, "sessionctl not found on the host") || !strings.Contains(missing, "ssh://box") {
		t.Errorf("exit 127: %s", missing)
	}
	far := (&HostError{Host: "ssh://box", ExitCode: 3, Stderr: "sessionctl: sessiond is not reachable at /x/s.sock (connect: No such file or directory)"}).Error()
	if strings.Contains(far, "not found on the host") || !strings.Contains(far, "ssh exited with status 3: sessionctl: sessiond is not reachable at /x/s.sock") {
		t.Errorf("exit 3: %s", far)
	}
}
