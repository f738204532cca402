//go:build linux

package opencode

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/opencodetest"
	"github.com/sessiond/sessiond/session"
)

// A real process holding the database open (as every OpenCode does for
// its whole life) blocks the offline repair: pending, naming its pid,
// nothing written. Once it is gone the repair goes through.
func TestRepairHeldByRealProcess(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "opencode.db")
	db := opencodetest.MustCreate(t, dbPath)
	sh, _ := db.InterruptedMidTool("/w/a", time.Now().Add(-2*time.Minute))
	before := rows(t, dbPath, sh.SessionID)
	holder, _ := fakeOpenCode(t, dir, dbPath, false)
	a := New(Config{DataDir: dir, ProcRoot: "/proc", BackupDir: t.TempDir()})
	tg := adapters.RepairTarget{UpstreamID: sh.SessionID, Source: dbPath, Cwd: "/w/a"}

	for _, apply := range []bool{false, true} {
		var steps []session.Step
		var err error
		if apply {
			steps, err = a.ApplyRepair(context.Background(), tg)
		} else {
			steps, err = a.PlanRepair(context.Background(), tg)
		}
		want := fmt.Sprintf("pending: held by pid %d", holder.Process.Pid)
		if err != nil || len(steps) != 1 || steps[0].Outcome != session.OutcomePending || !strings.Contains(steps[0].Detail, want) {
			t.Fatalf("apply=%v: %+v %v; want %q", apply, steps, err, want)
		}
	}
	if !equalMaps(rows(t, dbPath, sh.SessionID), before) {
		t.Fatal("written while held")
	}
	if bs, _ := a.backups(dbPath); len(bs) != 0 {
		t.Errorf("backups while held: %v", bs)
	}
	killAndReap(t, holder)
	steps, err := a.ApplyRepair(context.Background(), tg)
	if err != nil || count(steps)[session.OutcomeDone] != 3 {
		t.Fatalf("after the holder died: %+v %v", steps, err)
	}
	checkRepaired(t, dbPath, sh)
}

// kill -9 of a process in the middle of many offline repairs: the database
// passes PRAGMA integrity_check, and each session is either fully repaired
// (no part in flight, message completed) or byte for byte untouched. Every
// session the process reported repaired is repaired.
func TestOfflineRepairKilledMidway(t *testing.T) {
	const sessions, rounds = 16, 6
	untouchedTotal, repairedTotal, beyond := 0, 0, 0
	for round := 0; round < rounds; round++ {
		dir := t.TempDir()
		dbPath := filepath.Join(dir, "opencode.db")
		db, err := opencodetest.Create(dbPath)
		if err != nil {
			t.Fatal(err)
		}
		var shapes []opencodetest.Shape
		err = db.Tx(func(w *opencodetest.Writer) error {
			for i := 0; i < sessions; i++ {
				sh, err := w.InterruptedMidTool("/w/a", time.Now().Add(-2*time.Minute))
				if err != nil {
					return err
				}
				shapes = append(shapes, sh)
			}
			return nil
		})
		db.Close() // the helper must find no other process holding it
		if err != nil {
			t.Fatal(err)
		}
		orig := map[string]map[string]string{}
		ids := make([]string, len(shapes))
		for i, sh := range shapes {
			orig[sh.SessionID] = rows(t, dbPath, sh.SessionID)
			ids[i] = sh.SessionID
		}

		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), helperRepairEnv+"="+dbPath, helperRepairIDs+"="+strings.Join(ids, ","), helperRepairBackups+"="+filepath.Join(dir, "backups"))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAfter := 1 + rand.IntN(sessions-2)
		reported := map[string]bool{}
		sc := bufio.NewScanner(out)
		var first, last time.Time
		for len(reported) < killAfter && sc.Scan() {
			if id, ok := strings.CutPrefix(sc.Text(), "repaired "); ok {
				reported[id] = true
				last = time.Now()
				if first.IsZero() {
					first = last
				}
			}
		}
		// A random moment inside the next two repairs (the /proc scan,
		// the backup, the transaction), measured from the pace so far.
		per := 5 * time.Millisecond
		if n := len(reported); n > 1 {
			per = last.Sub(first) / time.Duration(n-1)
		}
		time.Sleep(time.Duration(rand.Int64N(int64(2*per) + 1)))
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if len(reported) < killAfter {
			t.Fatalf("round %d: the helper reported %d repairs, then stopped", round, len(reported))
		}

		if got := integrity(t, dbPath); got != "ok" {
			t.Fatalf("round %d: integrity_check after kill -9: %s", round, got)
		}
		a := New(Config{DataDir: dir, ProcRoot: "/proc"})
		untouched, repaired := 0, 0
		for _, sh := range shapes {
			now := rows(t, dbPath, sh.SessionID)
			if equalMaps(now, orig[sh.SessionID]) {
				if reported[sh.SessionID] {
					t.Fatalf("round %d: %s was reported repaired but is untouched", round, sh.SessionID)
				}
				untouched++
				continue
			}
			f, err := a.readFlightRO(context.Background(), dbPath, sh.SessionID)
			if err != nil {
				t.Fatal(err)
			}
			changed := 0
			for id, v := range now {
				if orig[sh.SessionID][id] != v {
					changed++
				}
			}
			// Fully repaired: nothing in flight, and exactly the tool part
			// and the assistant message rewritten.
			if !f.empty() || changed != 2 {
				t.Fatalf("round %d: session %s half repaired: %s in flight, %d rows changed", round, sh.SessionID, f.describe(), changed)
			}
			repaired++
		}
		t.Logf("round %d: killed after %d reported (%s a repair); %d repaired, %d untouched", round, killAfter, per.Round(time.Microsecond), repaired, untouched)
		beyond += repaired - len(reported)
		untouchedTotal += untouched
		repairedTotal += repaired
	}
	t.Logf("%d repairs committed after the last one reported (killed between commit and report)", beyond)
	if untouchedTotal == 0 || repairedTotal == 0 {
		t.Fatalf("the kills never landed mid way (%d repaired, %d untouched)", repairedTotal, untouchedTotal)
	}
}
