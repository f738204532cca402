package api

import (
	"os"
	"os/exec"
	"slices"
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
		// A socket under the far user's home; ~ spelled %7E is the same.
		{in: "ssh://me@box/~/.local/state/sessiond/s.sock", user: "me", host: "box", socket: "~/.local/state/sessiond/s.sock"},
		{in: "ssh://box/%7E/s.sock", host: "box", socket: "~/s.sock"},
		// Absolute paths that only look like it stay absolute.
		{in: "ssh://box//~/s.sock", host: "box", socket: "//~/s.sock"},
		{in: "ssh://box/~other/s.sock", host: "box", socket: "/~other/s.sock"},
		{in: "ssh://box/run/~/s.sock", host: "box", socket: "/run/~/s.sock"},
		{in: "ssh://box/~", err: "the far home, not a socket"},
		{in: "ssh://box/~/", err: "the far home, not a socket"},
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
			if h.ssh != nil {
				t.Errorf("ParseHost(%q) is an ssh host", tc.in)
			}
			continue
		}
		if h.ssh == nil || h.ssh.Host != tc.host || h.ssh.User != tc.user || h.ssh.Port != tc.port {
			t.Errorf("ParseHost(%q).SSH = %+v, want %s@%s:%d", tc.in, h.ssh, tc.user, tc.host, tc.port)
		}
	}
	hs, err := ParseHosts("ssh://a, ,unix:///s")
	if err != nil || len(hs) != 2 || hs[0].ssh == nil || hs[1].Socket != "/s" {
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

// A socket under ~/ is the far user's home: ssh is given ~/ unquoted
// and the rest quoted, no local shell expands it (SESSIOND_SSH_COMMAND
// passes the words as "$@"), and the far shell, which ssh hands the
// words joined by spaces, expands ~ to its own $HOME and takes the rest
// literally, whatever it holds.
func TestSSHArgvFarHome(t *testing.T) {
	const rest = `my dir/it's $(touch pwned) ;x` + "`id`" + `.sock`
	h, err := ParseHost("ssh://box/~/" + strings.ReplaceAll(rest, " ", "%20"))
	if err != nil {
		t.Fatal(err)
	}
	if h.Socket != "~/"+rest {
		t.Fatalf("socket %q, want %q", h.Socket, "~/"+rest)
	}
	// The local side: SESSIOND_SSH_COMMAND is run by sh; a stand-in ssh
	// prints the words it is given, one a line.
	local := t.TempDir()
	t.Setenv("HOME", local)
	t.Setenv(EnvRemoteSessionctl, "")
	t.Setenv(EnvSSHCommand, `printf '%s\n'`)
	argv := sshArgv(h)
	run := exec.Command(argv[0], argv[1:]...)
	run.Dir = local
	out, err := run.Output()
	if err != nil {
		t.Fatal(err)
	}
	words := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	i := slices.Index(words, "box")
	if i < 0 || words[i-1] != "--" {
		t.Fatalf("words given to ssh: %q", words)
	}
	far := words[i+1:]
	want := []string{"sessionctl", "dial-stdio", "--socket", `~/'my dir/it'\''s $(touch pwned) ;x` + "`id`" + `.sock'`}
	if !slices.Equal(far, want) {
		t.Fatalf("the far command's words:\n%q\nwant:\n%q", far, want)
	}
	// The far side: its shell, with its own HOME, runs the words as one
	// line (printf stands in for sessionctl and prints the socket).
	farHome := t.TempDir()
	far[0], far[1], far[2] = "printf", "'%s\n'", ""
	cmd := exec.Command("sh", "-c", strings.Join(far, " "))
	cmd.Dir = farHome
	cmd.Env = []string{"HOME=" + farHome, "PATH=" + os.Getenv("PATH")}
	got, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != farHome+"/"+rest+"\n" {
		t.Fatalf("the far shell read the socket as %q, want %q", got, farHome+"/"+rest+"\n")
	}
	for _, dir := range []string{local, farHome} {
		if _, err := os.Stat(dir + "/pwned"); err == nil {
			t.Fatalf("a shell ran what the path holds (%s/pwned)", dir)
		}
	}
}
