package proc

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
)

// statLine builds a realistic 52-field /proc/<pid>/stat line.
func statLine(pid int, comm string, state byte, ppid int, start uint64) string {
	return fmt.Sprintf("%d (%s) %c %d %d %d 0 -1 4194560 1289 0 0 0 3 1 0 0 20 0 1 0 %d "+
		"8470528 1015 18446744073709551615 94617043644416 94617043671633 140724632090080 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0 "+
		"94617043689136 94617043690688 94617061445632 140724632096570 140724632096580 140724632096580 140724632100843 0\n",
		pid, comm, state, ppid, pid, pid, start)
}

func TestParseStat(t *testing.T) {
	tests := []struct {
		name string
		line string
		want Stat
	}{
		{"plain", statLine(1234, "bash", 'S', 1, 98765), Stat{PID: 1234, Comm: "bash", State: 'S', PPID: 1, PGID: 1234, SID: 1234, TPGID: -1, StartTicks: 98765}},
		{"spaces", statLine(7, "tmux: server", 'S', 1, 5), Stat{PID: 7, Comm: "tmux: server", State: 'S', PPID: 1, PGID: 7, SID: 7, TPGID: -1, StartTicks: 5}},
		{"parens", statLine(1234, "a) b) (c", 'R', 99, 42), Stat{PID: 1234, Comm: "a) b) (c", State: 'R', PPID: 99, PGID: 1234, SID: 1234, TPGID: -1, StartTicks: 42}},
		{"closing paren last", statLine(8, "x)", 'Z', 2, 3), Stat{PID: 8, Comm: "x)", State: 'Z', PPID: 2, PGID: 8, SID: 8, TPGID: -1, StartTicks: 3}},
		{"empty comm", statLine(9, "", 'D', 0, 0), Stat{PID: 9, Comm: "", State: 'D', PPID: 0, PGID: 9, SID: 9, TPGID: -1, StartTicks: 0}},
		{"huge start", statLine(10, "k", 'I', 2, 1<<63), Stat{PID: 10, Comm: "k", State: 'I', PPID: 2, PGID: 10, SID: 10, TPGID: -1, StartTicks: 1 << 63}},
		{"no newline", strings.TrimSuffix(statLine(11, "n", 'S', 1, 77), "\n"), Stat{PID: 11, Comm: "n", State: 'S', PPID: 1, PGID: 11, SID: 11, TPGID: -1, StartTicks: 77}},
		{"own session", "13 (py) S 1 14 15 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 56", Stat{PID: 13, Comm: "py", State: 'S', PPID: 1, PGID: 14, SID: 15, TPGID: -1, StartTicks: 56}},
		{"exactly 22 fields", "12 (c) S 3 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 55", Stat{PID: 12, Comm: "c", State: 'S', PPID: 3, StartTicks: 55}},
		{"a terminal's foreground", "13 (claude) S 3 13 13 34817 13 0 0 0 0 0 0 0 0 0 0 0 0 0 66", Stat{PID: 13, Comm: "claude", State: 'S', PPID: 3, PGID: 13, SID: 13, TTY: 34817, TPGID: 13, StartTicks: 66}},
		{"a kernel thread", "14 (kworker/0:1-events) I 2 0 0 0 -1 69238880 0 0 0 0 0 3 0 0 20 0 1 0 38", Stat{PID: 14, Comm: "kworker/0:1-events", State: 'I', PPID: 2, TPGID: -1, Kernel: true, StartTicks: 38}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStat([]byte(tt.line))
			if err != nil {
				t.Fatalf("ParseStat: %v", err)
			}
			if got != tt.want {
				t.Fatalf("ParseStat = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseStatErrors(t *testing.T) {
	for _, line := range []string{
		"",
		"1234",
		"1234 (bash S 1 2",
		"1234 bash) S 1",
		"x (bash) S 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 5",
		"-1 (bash) S 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 5",
		"1 (bash) SS 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 5",
		"1 (bash) S -1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 5",
		"1 (bash) S 1 0 -1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 5",
		"1 (bash) S 1 0 99999999999 0 0 0 0 0 0 0 0 0 0 0 0 0 0 5",
		"1 (bash) S 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0",
		"1 (bash) S 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 x5",
		"1 (bash) S 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 18446744073709551616",
		"99999999999 (bash) S 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 5",
	} {
		if st, err := ParseStat([]byte(line)); err == nil {
			t.Errorf("ParseStat(%q) = %+v, want error", line, st)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte(statLine(1234, "bash", 'S', 1, 98765)))
	f.Add([]byte(statLine(1234, "a) b) (c", 'S', 1, 12)))
	f.Add([]byte("1234 (a) b) (c) S 1 1234 1234 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 556\n"))
	f.Add([]byte(statLine(42, "tmux: server", 'Z', 1, 0)))
	f.Add([]byte(statLine(2, "kworker/0:1H-kblockd", 'I', 2, 18446744073709551615)))
	f.Add([]byte("1 (systemd) S 0 1 1 0 -1 4194560 93 0 0 0 0 0 0 0 20 0 1 0 5 0"))
	f.Add([]byte("14 (kworker/0:1-events) I 2 0 0 0 -1 69238880 0 0 0 0 0 3 0 0 20 0 1 0 38"))
	f.Add([]byte("7 ()) X 1"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := ParseStat(b)
		if err != nil {
			return
		}
		if strings.ContainsAny(string(st.State), " \n") {
			t.Fatalf("state %q is a separator", st.State)
		}
		// Re-rendering what was parsed must parse back to the same thing.
		flags := 0
		if st.Kernel {
			flags = pfKthread
		}
		line := fmt.Sprintf("%d (%s) %s %d %d %d %d %d %d 0 0 0 0 0 0 0 0 0 0 0 0 %d 0 0\n",
			st.PID, st.Comm, string([]byte{st.State}), st.PPID, st.PGID, st.SID, st.TTY, st.TPGID, flags, st.StartTicks)
		st2, err := ParseStat([]byte(line))
		if err != nil {
			t.Fatalf("reparse %q: %v", line, err)
		}
		if st2 != st {
			t.Fatalf("reparse = %+v, want %+v", st2, st)
		}
	})
}

func TestSplitNUL(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"\x00", nil},
		{"bash\x00", []string{"bash"}},
		{"claude\x00--resume\x00a b\x00", []string{"claude", "--resume", "a b"}},
		{"tmux: server (x)", []string{"tmux: server (x)"}}, // rewritten argv, no NULs
		{"a\x00\x00b\x00", []string{"a", "", "b"}},
	}
	for _, tt := range tests {
		if got := splitNUL([]byte(tt.in)); !slices.Equal(got, tt.want) {
			t.Errorf("splitNUL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestEnvMarkers(t *testing.T) {
	env := "PATH=/usr/bin\x00ANTHROPIC_API_KEY=sk-ant-api03-secret\x00CLAUDECODE=1\x00" +
		"CLAUDE_CONFIG_DIR=/home/u/.claude\x00CLAUDECODE_X=no\x00=weird\x00novalue\x00OPENCODE=\x00"
	got := envMarkers([]byte(env))
	want := map[string]string{"CLAUDECODE": "1", "CLAUDE_CONFIG_DIR": "/home/u/.claude", "OPENCODE": ""}
	if !maps.Equal(got, want) {
		t.Fatalf("envMarkers = %v, want %v", got, want)
	}
	if got := envMarkers(nil); got == nil || len(got) != 0 {
		t.Fatalf("envMarkers(nil) = %#v, want empty non-nil map", got)
	}
}

func TestParseProcArgs2(t *testing.T) {
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, 3)
	b = append(b, "/usr/local/bin/claude\x00\x00\x00\x00"...)
	b = append(b, "claude\x00\x00--resume x\x00"...) // an empty argv[1]
	b = append(b, "HOME=/Users/u\x00ANTHROPIC_API_KEY=sk-secret\x00CLAUDECODE=1\x00\x00\x00"...)
	b = append(b, "ptr_munge=\x00main_stack=\x00"...)
	argv, env, ok := parseProcArgs2(b)
	if !ok {
		t.Fatal("parseProcArgs2 failed")
	}
	if want := []string{"claude", "", "--resume x"}; !slices.Equal(argv, want) {
		t.Errorf("argv = %q, want %q", argv, want)
	}
	if want := map[string]string{"HOME": "/Users/u", "CLAUDECODE": "1"}; !maps.Equal(env, want) {
		t.Errorf("env = %v, want %v", env, want)
	}
	if _, _, ok := parseProcArgs2([]byte{1, 0}); ok {
		t.Error("short buffer accepted")
	}
}

func TestDescendants(t *testing.T) {
	s := &Snapshot{Procs: map[int]*Process{}}
	add := func(pid, ppid int) { s.Procs[pid] = &Process{Identity: Identity{PID: pid}, PPID: ppid} }
	add(1, 0)
	add(100, 1)   // agent
	add(101, 100) // bash
	add(102, 101) // test runner
	add(103, 102)
	add(104, 100)
	add(200, 1) // unrelated
	add(201, 200)

	pids := func(ps []*Process) []int {
		var out []int
		for _, p := range ps {
			out = append(out, p.Identity.PID)
		}
		sort.Ints(out)
		return out
	}
	if got, want := pids(s.Descendants(100)), []int{101, 102, 103, 104}; !slices.Equal(got, want) {
		t.Errorf("Descendants(100) = %v, want %v", got, want)
	}
	if got, want := pids(s.Children(100)), []int{101, 104}; !slices.Equal(got, want) {
		t.Errorf("Children(100) = %v, want %v", got, want)
	}
	if got := s.Descendants(103); len(got) != 0 {
		t.Errorf("Descendants(leaf) = %v, want none", pids(got))
	}
	if got := s.Descendants(999); len(got) != 0 {
		t.Errorf("Descendants(absent) = %v, want none", pids(got))
	}
	// A cycle (possible in a torn snapshot across pid reuse) must end.
	add(300, 301)
	add(301, 300)
	if got, want := pids(s.Descendants(300)), []int{301}; !slices.Equal(got, want) {
		t.Errorf("Descendants(cycle) = %v, want %v", got, want)
	}
}
