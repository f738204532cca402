//go:build linux

// Package fakecodex runs a stand-in for a Codex owner as a real process:
// it holds a session's writer lock as Codex does and starts its tools the
// way Codex 0.169.0 does, so tests can kill it -9 and look at what its
// tools leave behind.
//
// Codex spawns each tool as `/proc/self/exe --codex-run-as-process-setup
// …`, which calls setsid() and prctl(PR_SET_PDEATHSIG, SIGTERM) and then
// execs `bash -c <cmd>` with CODEX_THREAD_ID=<session id>: the tool is
// Codex's child but leads a session and process group of its own; after a
// kill -9 of Codex its bash dies of the death signal and what the bash
// forked lives on, re-parented, in the dead bash's session. The fake does
// the same in one step (the setsid and the death signal through
// SysProcAttr).
//
// The fake is the test binary itself, run again: a package that uses it
// declares a test that calls Helper, and StartCodex runs the binary with
// -test.run naming that test.
package fakecodex

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sessiond/sessiond/internal/testkit/testenv"
)

// specEnv carries the Spec to the fake process, as JSON.
const specEnv = "SESSIOND_FAKE_CODEX_SPEC"

// Spec is what the fake does.
type Spec struct {
	// Lock is the writer lock file (thread-writer-locks/<id>.lock), held
	// with flock(LOCK_EX) for the fake's life.
	Lock string
	// Thread is the session id its tools carry in CODEX_THREAD_ID.
	Thread string
	// Tools are started at once, in order.
	Tools []Tool
	// Env is added to the tools' environment.
	Env []string
}

// Tool is one `bash -c Cmd` the fake starts.
type Tool struct {
	Cmd string
	// Plain starts it as a plain child: in the fake's own session and
	// group, without the death signal (not as Codex starts its tools).
	Plain bool
}

// Codex is a running fake.
type Codex struct {
	Cmd *exec.Cmd
	// Tools are the pids of the tools' bash, in the Spec's order.
	Tools []int
}

// Helper is the body of the test StartCodex runs: it turns the process
// into the fake when the spec is in its environment, and is a no-op (a
// skip) otherwise.
func Helper(t *testing.T) {
	raw := os.Getenv(specEnv)
	if raw == "" {
		t.Skip("the fake Codex's process only")
	}
	var spec Spec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "fakecodex:", err)
		os.Exit(2)
	}
	os.Exit(run(spec))
}

func run(spec Spec) int {
	f, err := os.OpenFile(spec.Lock, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakecodex:", err)
		return 3
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		fmt.Fprintln(os.Stderr, "fakecodex:", err)
		return 4
	}
	// PR_SET_PDEATHSIG fires when the thread that forked exits: keep this
	// goroutine on its thread for the process's life.
	runtime.LockOSThread()
	env := append(os.Environ(), spec.Env...)
	env = append(env, "CODEX_THREAD_ID="+spec.Thread)
	var pids []string
	for _, tl := range spec.Tools {
		cmd := exec.Command("bash", "-c", tl.Cmd)
		cmd.Env = env
		if !tl.Plain {
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGTERM}
		}
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "fakecodex:", err)
			return 5
		}
		pids = append(pids, strconv.Itoa(cmd.Process.Pid))
	}
	// Written whole, then renamed: a reader never sees it half written.
	if err := os.WriteFile(spec.Lock+".tmp", []byte(strings.Join(pids, " ")), 0o644); err != nil {
		return 6
	}
	if err := os.Rename(spec.Lock+".tmp", spec.Lock+".ready"); err != nil {
		return 6
	}
	time.Sleep(10 * time.Minute)
	runtime.KeepAlive(f) // the lock lives as long as the open file
	return 0
}

// StartCodex runs the test binary as a fake Codex through the test named
// helper (which calls Helper), and returns once its lock is held and its
// tools started. setsid makes the fake lead a session and group of its
// own, as a Codex sessiond launched does. The test's end kills it and
// every process left in its tools' sessions.
func StartCodex(t testing.TB, helper string, spec Spec, setsid bool) *Codex {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(spec.Lock), 0o755); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(spec.Lock + ".ready")
	cmd := exec.Command(os.Args[0], "-test.run=^"+helper+"$", "-test.timeout=0")
	cmd.Env = append(os.Environ(), specEnv+"="+string(raw))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &Codex{Cmd: cmd}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		for i, pid := range c.Tools {
			if !spec.Tools[i].Plain {
				syscall.Kill(-pid, syscall.SIGKILL) // the tool's session is its group too
			}
		}
		if setsid {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	var ready []byte
	testenv.Eventually(t, 20*time.Second, "the fake Codex holds its lock and started its tools", func() bool {
		ready, err = os.ReadFile(spec.Lock + ".ready")
		return err == nil
	})
	for _, f := range strings.Fields(string(ready)) {
		pid, _ := strconv.Atoi(f)
		c.Tools = append(c.Tools, pid)
	}
	return c
}

// Kill kills the fake with SIGKILL, as a crash does, and collects it.
func (c *Codex) Kill() {
	c.Cmd.Process.Kill()
	c.Cmd.Wait()
}
