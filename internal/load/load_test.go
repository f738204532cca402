// Package load puts the real sessiond under many concurrent clients and
// event subscribers and checks it serves them all without an error and
// without keeping anything behind (goroutines, file descriptors).
//
// By default the load lasts a few seconds; SESSIOND_LOAD_DURATION=20s runs
// the full load of BENCHMARKS.md (cmd/sessiond-bench -only load prints its
// figures).
package load

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/bench"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	daemontest.Cleanup()
	os.Exit(code)
}

// tolerance is how many goroutines or descriptors more than before the
// load the daemon may hold after it.
const tolerance = 5

func duration(t *testing.T) time.Duration {
	d := 3 * time.Second
	if v := os.Getenv("SESSIOND_LOAD_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("SESSIOND_LOAD_DURATION=%q: %v", v, err)
		}
	}
	return d
}

// 200 clients (half of them dialling anew for every request) and 20
// event subscribers, while owners start and die: no request fails, every
// subscriber gets every event once and in order, and afterwards the
// daemon holds no more goroutines or descriptors than before.
func TestLoad(t *testing.T) {
	if !bench.Supported {
		t.Skip("counts descriptors in /proc")
	}
	e := daemontest.NewEnv(t)
	root := filepath.Join(e.Home, ".claude")
	owners, err := bench.NewOwners(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(owners.KillAll)
	const history, live = 100, 5
	if _, err := owners.Root.WriteHistory(claudetest.HistorySpec{Files: history, Projects: 5, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	for range live {
		if _, err := owners.Start(filepath.Join(e.Home, "live")); err != nil {
			t.Fatal(err)
		}
	}
	churn, err := bench.NewOwners(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(churn.KillAll)
	d := e.StartDaemon("--claude-dir", root, "--log-level", "info")

	ctx := context.Background()
	var sessions []api.Session
	testenv.EventuallyOK(t, 30*time.Second, fmt.Sprintf("%d sessions listed", history+live), func() (bool, string) {
		ss, err := api.NewClient(e.Socket).Sessions(ctx, api.ListOptions{All: true})
		sessions = ss
		return err == nil && len(ss) >= history+live, fmt.Sprintf("%d listed: %v", len(ss), err)
	})

	rep, growth, err := bench.LoadWithFootprint(ctx, bench.LoadConfig{
		Socket: e.Socket, Clients: 200, Subscribers: 20, Duration: duration(t),
		Sessions: sessions, Churn: churn, Cwd: filepath.Join(e.Home, "churn"), Log: t.Logf,
	}, d.Cmd.Process.Pid, tolerance)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d requests (%.0f/s), latency %s; %d events recorded, %d delivered to %d subscribers; %d owners churned",
		rep.Requests, rep.Throughput, rep.Latency, rep.EventsRecorded, rep.EventsDelivered, rep.Subscribers, rep.OwnersChurned)
	t.Logf("goroutines %s; descriptors %s", growth.GoroutinesString(), growth.FDsString())
	if rep.Requests == 0 {
		t.Fatal("no request was made")
	}
	if rep.Errors != 0 {
		t.Errorf("%d of %d requests failed, for example %q", rep.Errors, rep.Requests, rep.ErrorSamples)
	}
	if rep.EventsRecorded == 0 {
		t.Error("no event was recorded during the load: the subscribers were not tested")
	}
	if rep.EventsMissed != 0 || rep.EventsDuplicated != 0 || rep.SubscriberErrors != 0 {
		t.Errorf("event streams: %d missed, %d duplicated or out of order, %d subscriber errors", rep.EventsMissed, rep.EventsDuplicated, rep.SubscriberErrors)
	}
	if g := growth.Goroutines(); g > tolerance {
		t.Errorf("goroutines grew by %d: %s", g, growth.GoroutinesString())
	}
	if g := growth.FDs(); g > tolerance {
		t.Errorf("file descriptors grew by %d: %s", g, growth.FDsString())
	}
}
