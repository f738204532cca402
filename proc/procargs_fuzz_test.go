package proc

import (
	"encoding/binary"
	"strings"
	"testing"
)

// FuzzParseProcArgs2: no kern.procargs2 buffer (macOS, read from another
// process) makes the parser panic; it never returns more arguments than
// argc says, and only marker keys come out of the environment.
func FuzzParseProcArgs2(f *testing.F) {
	mk := func(argc uint32, rest string) []byte {
		return append(binary.LittleEndian.AppendUint32(nil, argc), rest...)
	}
	f.Add(mk(3, "/usr/local/bin/claude\x00\x00\x00\x00claude\x00--resume\x00abc\x00CLAUDE_CONFIG_DIR=/Users/u/.claude\x00HOME=/Users/u\x00ptr_munge=\x00"))
	f.Add(mk(2, "/opt/homebrew/bin/opencode\x00opencode\x00serve\x00XDG_DATA_HOME=/x\x00"))
	f.Add(mk(1, "/bin/sleep"))
	f.Add(mk(1000000, "/bin/x\x00a\x00"))
	f.Add(mk(0, "\x00\x00\x00=\x00=x\x00CLAUDE_CONFIG_DIR\x00"))
	f.Add([]byte{1, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		argv, env, ok := parseProcArgs2(b)
		if !ok {
			return
		}
		if argc := binary.LittleEndian.Uint32(b); uint64(len(argv)) > uint64(argc) {
			t.Fatalf("%d arguments for argc %d", len(argv), argc)
		}
		for k := range env {
			known := false
			for _, m := range markerVars {
				known = known || k == m
			}
			if !known || strings.Contains(k, "=") {
				t.Fatalf("environment key %q is not a marker", k)
			}
		}
	})
}
