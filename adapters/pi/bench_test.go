package pi

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// BenchmarkIdlePass is a pass over 1,000 session files (in 50 project
// folders, settled, nothing changed since the last pass): what an idle
// daemon pays every few seconds. BenchmarkFirstPass reads them all.
func BenchmarkIdlePass(b *testing.B) {
	root := benchRoot(b, 1000)
	a := newAdapter(root)
	discover(b, a, nil)
	b.ResetTimer()
	for range b.N {
		discover(b, a, nil)
	}
}

func BenchmarkFirstPass(b *testing.B) {
	root := benchRoot(b, 1000)
	b.ResetTimer()
	for range b.N {
		discover(b, newAdapter(root), nil)
	}
}

func benchRoot(b *testing.B, n int) string {
	root := b.TempDir()
	old := time.Now().Add(-time.Hour)
	for i := range n {
		id := fmt.Sprintf("019ac0de-0000-7000-8000-%012d", i)
		p := writeSession(b, root, fmt.Sprintf("/w/p%d", i%50), id, modelChange(0), user(1, "do it"), callBash(2, "c1", "make"),
			result(3, "c1", "ok"), say(4, "done", "stop"))
		os.Chtimes(p, old, old)
	}
	return root
}
