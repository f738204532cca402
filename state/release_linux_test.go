package state

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/session"
)

// mappedRSS is the resident size, in KiB, of this process's mappings of
// path, from /proc/self/smaps.
func mappedRSS(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	total, in := 0, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			in = len(fields) >= 6 && fields[5] == path
			continue
		}
		if in && len(fields) >= 2 && fields[0] == "Rss:" {
			n, _ := strconv.Atoi(fields[1])
			total += n
		}
	}
	return total
}

// After ReleaseMapped the store file's pages no longer count in the
// process's resident set; the store still reads and writes as before.
func TestReleaseMappedDropsResidentPages(t *testing.T) {
	path := dbPath(t)
	st := openT(t, path, Options{})
	for i := range 3000 {
		r := &session.Record{Agent: "claude", UpstreamID: fmt.Sprintf("up-%d", i), Status: session.StatusStopped,
			Cwd: strings.Repeat("/p", 100), CreatedAt: time.Now()}
		if err := st.Create(r, session.Event{Type: session.EventCreated, To: r.Status}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Events(0, 0); err != nil { // read every page of the events
		t.Fatal(err)
	}
	before := mappedRSS(t, path)
	if before < 256 {
		t.Fatalf("only %d KiB of the store file resident after reading it: the test measures nothing", before)
	}
	if err := st.ReleaseMapped(); err != nil {
		t.Fatal(err)
	}
	if after := mappedRSS(t, path); after > before/8 {
		t.Fatalf("resident KiB of the store file: %d before, %d after ReleaseMapped", before, after)
	}
	if _, err := st.ByUpstream("claude", "up-2999"); err != nil {
		t.Fatalf("read after release: %v", err)
	}
	r := &session.Record{Agent: "claude", UpstreamID: "after", Status: session.StatusStopped, CreatedAt: time.Now()}
	if err := st.Create(r, session.Event{Type: session.EventCreated, To: r.Status}); err != nil {
		t.Fatalf("write after release: %v", err)
	}
}
