//go:build darwin

package proc

import "github.com/shirou/gopsutil/v4/process"

// cwdOf reads a process's working directory through gopsutil, which calls
// libproc's proc_pidinfo(PROC_PIDVNODEPATHINFO) without cgo. It returns ""
// when the directory cannot be read (another user's process).
func cwdOf(pid int) string {
	p := &process.Process{Pid: int32(pid)}
	cwd, err := p.Cwd()
	if err != nil {
		return ""
	}
	return cwd
}
