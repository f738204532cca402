package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
)

// Holders lists the processes that hold any of paths open, by pid. Without
// /proc it asks lsof (part of macOS); when lsof is missing or its answer
// is unclear it returns an error, and the caller must then assume the
// files are held: a writer that waits is better than one that races
// another.
func (h *Host) Holders(paths ...string) ([]int, error) {
	named := strings.Join(paths, ", ")
	if _, err := exec.LookPath("lsof"); err != nil {
		return nil, fmt.Errorf("cannot tell which processes hold %s open: %w", named, err)
	}
	var existing []string
	for _, f := range paths {
		if fileExists(f) {
			existing = append(existing, f)
		}
	}
	if len(existing) == 0 {
		return nil, nil // no file, no holder (and lsof without files lists everything)
	}
	cmd := exec.Command("lsof", append([]string{"-F", "p", "--"}, existing...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	// lsof exits 1 both when no process has the files open and on errors;
	// only a silent exit 1 means "none".
	if errors.As(err, &ee) && ee.ExitCode() == 1 && out.Len() == 0 && strings.TrimSpace(errb.String()) == "" {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lsof %s: %v: %s", named, err, strings.TrimSpace(errb.String()))
	}
	seen := map[int]bool{}
	var pids []int
	for _, line := range strings.Split(out.String(), "\n") {
		if v, ok := strings.CutPrefix(line, "p"); ok {
			if pid, err := strconv.Atoi(v); err == nil && !seen[pid] {
				seen[pid] = true
				pids = append(pids, pid)
			}
		}
	}
	sort.Ints(pids)
	return pids, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
