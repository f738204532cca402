package proc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The machine id is read the way Claude Code reads it: the file trimmed,
// "" when it cannot be read, and no other source.
func TestMachineIDAsClaudeReadsIt(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "machine-id")
	if err := os.WriteFile(f, []byte("  3d1219c7c4c5404aaa1f6d2a48adfda4\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	if got := (&Host{MachineIDFile: f}).MachineID(); got != "3d1219c7c4c5404aaa1f6d2a48adfda4" {
		t.Fatalf("machine id %q", got)
	}
	if got := (&Host{MachineIDFile: filepath.Join(dir, "missing")}).MachineID(); got != "" {
		t.Fatalf("unreadable machine id read as %q, want empty", got)
	}
	h := NewHost()
	want, _ := os.Readlink("/proc/self/ns/pid")
	if got := h.PIDNamespace(); got != want || !strings.HasPrefix(got, "pid:[") {
		t.Fatalf("PID namespace %q, want %q", got, want)
	}
	bt, err := h.BootTime()
	if err != nil || bt.After(time.Now()) || bt.Before(time.Now().Add(-10*365*24*time.Hour)) {
		t.Fatalf("boot time %v, %v", bt, err)
	}
}

func TestLastNSpid(t *testing.T) {
	for in, want := range map[string]int{
		"Name:\tsleep\nNSpid:\t5166\t1\nNStgid:\t5166\t1\n": 1,
		"NSpid:\t42\n": 42,
		"Name:\tx\n":   0,
		"NSpid:\n":     0,
		"NSpid:\tx\n":  0,
	} {
		got, ok := lastNSpid([]byte(in))
		if got != want || ok != (want > 0) {
			t.Errorf("%q: %d %v, want %d", in, got, ok, want)
		}
	}
}

// In its own namespace a process is found under its own pid.
func TestFindInNamespaceSelf(t *testing.T) {
	h := NewHost()
	ns := h.PIDNamespace()
	if ns == "" {
		t.Skip("no namespace link")
	}
	got, err := h.FindInNamespace(ns, os.Getpid())
	if err != nil || !got.Visible || got.Found.PID != os.Getpid() {
		t.Fatalf("found %+v, %v", got, err)
	}
	if r := h.Probe(got.Found); r.Liveness != Alive {
		t.Fatalf("probe %v", r)
	}
	got, err = h.FindInNamespace("pid:[1]", 1)
	if err != nil || got.Visible {
		t.Fatalf("a namespace no process is in: %+v, %v", got, err)
	}
}
