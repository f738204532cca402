package buildinfo

import (
	"strings"
	"testing"
)

// A version stamped at build time wins; without one the answer still
// names a build (a test binary has no stamp).
func TestVersion(t *testing.T) {
	if got := Version("v1.2.3"); got != "v1.2.3" {
		t.Errorf("Version(v1.2.3) = %q", got)
	}
	if got := Version(""); got == "" || (got != "dev" && !strings.HasPrefix(got, "dev-") && !strings.HasPrefix(got, "v")) {
		t.Errorf("Version(\"\") = %q, want dev, dev-<revision> or a module version", got)
	}
}
