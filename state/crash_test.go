package state

import (
	"bufio"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// acked is the last acknowledged write of one session.
type acked struct {
	upstream string
	title    int
	seq      uint64
}

// TestCrashConsistency kills a writing subprocess with SIGKILL at random
// points and checks that every write it acknowledged survived, that the
// file is consistent, and that event seqs only go up.
func TestCrashConsistency(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocess crash test")
	}
	path := dbPath(t)
	ack := map[string]acked{}
	var maxAcked, prevLast uint64
	for round := range 5 {
		lines := runAndKill(t, path, 30+round*40)
		if len(lines) == 0 {
			t.Fatalf("round %d: the child acknowledged nothing", round)
		}
		for i, l := range lines {
			f := strings.Fields(l)
			if len(f) != 5 && len(f) != 4 {
				t.Fatalf("bad line %q", l)
			}
			if len(f) == 4 { // no upstream id
				f = []string{f[0], f[1], "", f[2], f[3]}
			}
			title, _ := strconv.Atoi(f[3])
			seq, _ := strconv.ParseUint(f[4], 10, 64)
			if i == 0 && seq <= prevLast {
				t.Fatalf("round %d: first seq %d does not follow %d from before the crash", round, seq, prevLast)
			}
			ack[f[1]] = acked{upstream: f[2], title: title, seq: seq}
			maxAcked = max(maxAcked, seq)
		}

		st := openT(t, path, Options{MaxEvents: 1 << 30})
		if st.Recovered() != "" {
			t.Fatalf("round %d: the store was found corrupt after SIGKILL", round)
		}
		var checkErrs []error
		st.db.View(func(tx *bolt.Tx) error {
			for err := range tx.Check() {
				checkErrs = append(checkErrs, err)
			}
			return nil
		})
		if len(checkErrs) > 0 {
			t.Fatalf("round %d: tx.Check: %v", round, checkErrs)
		}
		for id, a := range ack {
			r, err := st.Get(id)
			if err != nil {
				t.Fatalf("round %d: acknowledged session %s lost: %v", round, id, err)
			}
			title, _ := strconv.Atoi(r.Title)
			if title < a.title {
				t.Fatalf("round %d: session %s holds write %d, acknowledged %d", round, id, title, a.title)
			}
			if title == a.title && r.UpstreamID != a.upstream {
				t.Fatalf("round %d: session %s upstream %q, acknowledged %q", round, id, r.UpstreamID, a.upstream)
			}
		}
		last := lastSeq(t, st)
		if last < maxAcked {
			t.Fatalf("round %d: LastSeq %d below acknowledged %d", round, last, maxAcked)
		}
		evs, err := st.Events(0, 0)
		if err != nil {
			t.Fatal(err)
		}
		seqs := map[uint64]string{}
		for i, ev := range evs {
			if i > 0 && ev.Seq <= evs[i-1].Seq {
				t.Fatalf("round %d: event seq %d after %d", round, ev.Seq, evs[i-1].Seq)
			}
			seqs[ev.Seq] = ev.SessionID
		}
		for id, a := range ack {
			if seqs[a.seq] != id {
				t.Fatalf("round %d: acknowledged event %d of %s holds %q", round, a.seq, id, seqs[a.seq])
			}
		}
		checkIndex(t, st)
		prevLast = last // the next round's seqs must go past everything stored
		st.Close()
		t.Logf("round %d: %d lines acknowledged, %d sessions, last seq %d", round, len(lines), len(ack), last)
	}
}

// runAndKill starts the crash child on path, lets it acknowledge about n
// writes, kills it with SIGKILL and returns every complete line it wrote.
func runAndKill(t *testing.T, path string, n int) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"=crash", envDB+"="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(stdout)
	var lines []string
	deadline := time.AfterFunc(20*time.Second, func() { cmd.Process.Kill() })
	defer deadline.Stop()
	for len(lines) < n {
		l, err := r.ReadString('\n')
		if err != nil {
			break
		}
		lines = append(lines, strings.TrimSuffix(l, "\n"))
	}
	// Kill at a random point of the child's next write.
	time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
	if err := cmd.Process.Kill(); err != nil { // SIGKILL on Unix
		t.Fatal(err)
	}
	// Lines already in the pipe were acknowledged too; a cut-off last line
	// (no newline) was not.
	for {
		l, err := r.ReadString('\n')
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.TrimSuffix(l, "\n"))
	}
	werr := cmd.Wait()
	if ps := cmd.ProcessState; ps == nil || ps.Exited() {
		t.Fatalf("child ended on its own (%v): %s", werr, stderr.String())
	}
	if len(lines) < n {
		t.Fatalf("child wrote %d lines, wanted %d: %s", len(lines), n, stderr.String())
	}
	return lines
}
