package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/internal/bench"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	daemontest.Cleanup()
	os.Exit(code)
}

// The benchmark at -quick scale runs every scenario against the real
// binaries and prints a row for each, with no scenario failing. Its
// figures are not checked: at this scale they mean little, and wall-clock
// figures have no place in a test's verdict.
func TestQuick(t *testing.T) {
	if !bench.Supported {
		t.Skip("the benchmark reads its figures from /proc")
	}
	bins := daemontest.Binaries(t)
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-quick", "-q", "-tmp", t.TempDir(), "-sessiond", bins.Sessiond, "-sessionctl", bins.Sessionctl}, &out, &errb)
	t.Logf("output:\n%s", out.String())
	if code != 0 {
		t.Fatalf("sessiond-bench -quick exited %d\n%s", code, errb.String())
	}
	for _, want := range []string{"machine:", "command:  sessiond-bench -quick"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, scn := range bench.Scenarios {
		if !strings.Contains(out.String(), "\n"+scn+" ") {
			t.Errorf("no row for scenario %s", scn)
		}
	}
	if strings.Contains(out.String(), "ERROR") {
		t.Errorf("a scenario failed")
	}
}

func TestFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"-only", "nosuch"}, &out, &errb); code != 2 {
		t.Errorf("-only nosuch: exit %d, want 2", code)
	}
	if code := run(context.Background(), []string{"-format", "xml"}, &out, &errb); code != 2 {
		t.Errorf("-format xml: exit %d, want 2", code)
	}
	if code := run(context.Background(), []string{"-agents", "gemini,nosuch"}, &out, &errb); code != 2 {
		t.Errorf("-agents gemini,nosuch: exit %d, want 2", code)
	}
	if code := run(context.Background(), []string{"-growth", "1000,x"}, &out, &errb); code != 2 {
		t.Errorf("-growth 1000,x: exit %d, want 2", code)
	}
}
