package state

import (
	"bufio"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/session"
)

// Environment of the re-executed test binary (see childMain).
const (
	envChild = "SESSIOND_STATE_TEST_CHILD" // "hold" or "crash"
	envDB    = "SESSIOND_STATE_TEST_DB"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(envChild); mode != "" {
		os.Exit(childMain(mode, os.Getenv(envDB)))
	}
	goleak.VerifyTestMain(m)
}

// childMain is the subprocess side of the lock and crash tests.
//
// "hold" opens the store, prints "ready" and keeps it until stdin closes.
// "crash" writes forever, printing each write only after it returned, so
// every printed line is a committed (acknowledged) write:
//
//	C <id> <upstream> <title> <seq>   a session was created
//	U <id> <upstream> <title> <seq>   a session was updated
//	B <id> <upstream> <title> <seq>   updated in a batch of three
//
// Titles are a counter that only grows, so the parent can tell whether a
// record holds at least the acknowledged write.
func childMain(mode, path string) int {
	st, err := Open(path, Options{Timeout: 10 * time.Second, MaxEvents: 1 << 30})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer st.Close()
	switch mode {
	case "hold":
		fmt.Println("ready")
		bufio.NewReader(os.Stdin).ReadString('\n')
		return 0
	case "crash":
	default:
		fmt.Fprintln(os.Stderr, "unknown child mode", mode)
		return 2
	}
	pid := os.Getpid()
	var ids []string
	counter := 0
	ack := func(kind string, r *session.Record) {
		seq, err := st.LastSeq()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Printf("%s %s %s %s %d\n", kind, r.ID, r.UpstreamID, r.Title, seq)
	}
	for n := 0; ; n++ {
		counter++
		r := &session.Record{
			Agent: "claude", UpstreamID: fmt.Sprintf("up-%d-%d", pid, n),
			Status: session.StatusRunning, Title: fmt.Sprint(counter), Cwd: "/work/" + fmt.Sprint(n),
		}
		if err := st.Create(r, session.Event{Type: session.EventCreated, To: r.Status}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		ids = append(ids, r.ID)
		ack("C", r)
		for _, id := range []string{ids[n/2], ids[n*7%len(ids)]} {
			counter++
			title := fmt.Sprint(counter)
			rec, err := st.Update(id, func(r *session.Record) ([]session.Event, error) {
				from := r.Status
				r.Status = session.StatusStopped
				if from == r.Status {
					r.Status = session.StatusRunning
				}
				r.Title = title
				if counter%5 == 0 {
					r.UpstreamID = fmt.Sprintf("up-%d-r%d", pid, counter)
				}
				return []session.Event{{Type: session.EventStatus, From: from, To: r.Status}}, nil
			})
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 2
			}
			ack("U", rec)
		}
		if n%4 == 3 {
			// A reconciler-style batch: three sessions, one commit.
			var recs []*session.Record
			err := st.Batch(func(tx *Tx) error {
				recs = recs[:0]
				for _, id := range []string{ids[n-1], ids[n-2], ids[n/3]} {
					counter++
					title := fmt.Sprint(counter)
					r, err := tx.Update(id, func(r *session.Record) ([]session.Event, error) {
						r.Title = title
						return []session.Event{{Type: session.EventUpdated}}, nil
					})
					if err != nil {
						return err
					}
					recs = append(recs, r)
				}
				return nil
			})
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 2
			}
			last, _ := st.LastSeq()
			for i, r := range recs {
				fmt.Printf("B %s %s %s %d\n", r.ID, r.UpstreamID, r.Title, last-uint64(len(recs)-1-i))
			}
		}
	}
}
