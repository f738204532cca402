package opencode

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as a fake opencode process: started with
// helperDBEnv set (and argv[0] "opencode"), it holds the database open as
// OpenCode does for its whole life, optionally starts a tool subprocess
// carrying OPENCODE_PID as OpenCode's bash tool does (a plain child
// `sleep 300` with helperToolEnv; with helperToolCmdEnv, `bash -c <cmd>`
// in a session of its own, as 1.18.33 runs a tool), says "ready" and
// sleeps until killed.
const (
	helperDBEnv      = "SESSIOND_OPENCODE_HELPER_DB"
	helperToolEnv    = "SESSIOND_OPENCODE_HELPER_TOOL"
	helperToolCmdEnv = "SESSIOND_OPENCODE_HELPER_TOOL_CMD"
)

func TestMain(m *testing.M) {
	if db := os.Getenv(helperDBEnv); db != "" {
		helperMain(db)
		return
	}
	if db := os.Getenv(helperRepairEnv); db != "" {
		repairHelperMain(db)
		return
	}
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

func helperMain(db string) {
	f, err := os.Open(db)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer f.Close()
	wal, err := os.Open(db + "-wal")
	if err == nil {
		defer wal.Close()
	}
	if os.Getenv(helperToolEnv) != "" || os.Getenv(helperToolCmdEnv) != "" {
		tool := exec.Command("sleep", "300")
		if c := os.Getenv(helperToolCmdEnv); c != "" {
			tool = exec.Command("bash", "-c", c)
			tool.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		}
		tool.Env = append(os.Environ(), "OPENCODE=1", "AGENT=1", "OPENCODE_PID="+strconv.Itoa(os.Getpid()))
		tool.Env = append(tool.Env, helperDBEnv+"=", helperToolCmdEnv+"=") // the tool is not a helper itself
		if err := tool.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println("tool", tool.Process.Pid)
	}
	fmt.Println("ready")
	time.Sleep(10 * time.Minute)
}
