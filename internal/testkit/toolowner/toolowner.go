// Package toolowner runs a stand-in for an agent process that starts its
// tools as Claude Code 2.1.328 and OpenCode 1.18.33 do: each tool is a
// `bash -c <cmd>` child of the agent leading a session (and process group)
// of its own, with the agent's marker variables in its environment, and
// nothing ties its life to the agent's: after a kill -9 of the agent the
// bash and what it forked live on, re-parented. (Codex differs: its tools
// get a death signal; see codextest/fakecodex.)
//
// The stand-in is the test binary itself, run again: a package that uses
// it declares a test that calls Helper, and Start runs the binary with
// -test.run naming that test.
package toolowner

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/testenv"
)

// specEnv carries the Spec to the stand-in, as JSON.
const specEnv = "SESSIOND_TOOL_OWNER_SPEC"

// Spec is what the stand-in does.
type Spec struct {
	// Env is added to every tool's environment; "{pid}" in it stands for
	// the owner's pid (CLAUDE_PID={pid}).
	Env []string
	// Tools are started at once, in order.
	Tools []Tool
	// Setsid makes the owner lead a session and group of its own (as
	// sessiond launches an agent); Setpgid a group only (as a shell with
	// job control starts one). Neither: it stays in the test's.
	Setsid, Setpgid bool
	// Ready is the file the owner writes its tools' pids to (Start sets it).
	Ready string
}

// Tool is one `bash -c Cmd` the owner starts.
type Tool struct {
	Cmd string
	// Env is added to this tool's environment after Spec.Env.
	Env []string
	// Plain starts it as a plain child, in the owner's own session and
	// group (as Claude starts its MCP servers).
	Plain bool
}

// Owner is a running stand-in.
type Owner struct {
	Cmd *exec.Cmd
	// Tools are the pids of the tools' bash, in the Spec's order.
	Tools []int
}

// PID is the owner's pid.
func (o *Owner) PID() int { return o.Cmd.Process.Pid }

// Helper is the body of the test Start runs: it turns the process into
// the stand-in when the spec is in its environment, and is a no-op (a
// skip) otherwise.
func Helper(t *testing.T) {
	raw := os.Getenv(specEnv)
	if raw == "" {
		t.Skip("the tool owner's process only")
	}
	var spec Spec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "toolowner:", err)
		os.Exit(2)
	}
	os.Exit(run(spec))
}

func run(spec Spec) int {
	self := strconv.Itoa(os.Getpid())
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, specEnv+"=") {
			env = append(env, kv)
		}
	}
	for _, kv := range spec.Env {
		env = append(env, strings.ReplaceAll(kv, "{pid}", self))
	}
	var pids []string
	for _, tl := range spec.Tools {
		cmd := exec.Command("bash", "-c", tl.Cmd)
		cmd.Env = env
		for _, kv := range tl.Env {
			cmd.Env = append(cmd.Env, strings.ReplaceAll(kv, "{pid}", self))
		}
		if !tl.Plain {
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		}
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "toolowner:", err)
			return 5
		}
		pids = append(pids, strconv.Itoa(cmd.Process.Pid))
	}
	// Written whole, then renamed: a reader never sees it half written.
	if err := os.WriteFile(spec.Ready+".tmp", []byte(strings.Join(pids, " ")), 0o644); err != nil {
		return 6
	}
	if err := os.Rename(spec.Ready+".tmp", spec.Ready); err != nil {
		return 6
	}
	time.Sleep(10 * time.Minute)
	return 0
}

// Start runs the test binary as a tool owner through the test named
// helper (which calls Helper) with env added to its own environment, and
// returns once its tools started. The test's end kills it and every
// process left in its tools' sessions (and its own, with Setsid or
// Setpgid).
func Start(t testing.TB, helper string, spec Spec, env ...string) *Owner {
	t.Helper()
	spec.Ready = filepath.Join(t.TempDir(), "ready")
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+helper+"$", "-test.timeout=0")
	cmd.Env = append(append(os.Environ(), env...), specEnv+"="+string(raw))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: spec.Setsid, Setpgid: spec.Setpgid && !spec.Setsid}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	o := &Owner{Cmd: cmd}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		for i, pid := range o.Tools {
			if !spec.Tools[i].Plain {
				syscall.Kill(-pid, syscall.SIGKILL) // the tool's session is its group too
			}
		}
		if spec.Setsid || spec.Setpgid {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	var ready []byte
	testenv.Eventually(t, 20*time.Second, "the tool owner started its tools", func() bool {
		ready, err = os.ReadFile(spec.Ready)
		return err == nil
	})
	for _, f := range strings.Fields(string(ready)) {
		pid, _ := strconv.Atoi(f)
		o.Tools = append(o.Tools, pid)
	}
	return o
}

// Kill kills the owner with SIGKILL, as a crash does, and collects it.
func (o *Owner) Kill() {
	o.Cmd.Process.Kill()
	o.Cmd.Wait()
}
