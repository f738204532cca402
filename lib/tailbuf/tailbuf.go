// Package tailbuf keeps the end of what a process writes: its last lines
// are what explain a failure, and a chatty process must not grow memory.
package tailbuf

import (
	"strings"
	"sync"
)

// Buffer is an io.Writer that keeps the last Max bytes written to it. It
// is safe for concurrent use (a process's stdout and stderr at once).
type Buffer struct {
	Max int

	mu sync.Mutex
	b  []byte
}

func (t *Buffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.Max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

// String is what is kept.
func (t *Buffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// LastLine is the last non-empty line kept, trimmed: what a failing
// command said last.
func (t *Buffer) LastLine() string {
	s := strings.TrimSpace(t.String())
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[i+1:])
	}
	return s
}
