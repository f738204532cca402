package qwen

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/kit"
)

// The session registry. Each interactive qwen (the TUI; 0.24.4 writes no
// entry for `qwen -p`) keeps <home>/sessions/<pid>.json while it runs:
// {"schemaVersion": 1, "pid", "procStart": "<boot id>:<start ticks>",
// "pidNs", "sessionId", "cwd", "name", "startedAt", "qwenVersion",
// "kind": "tui", "ipcPath", "ipcToken"}. It is written at start (before
// the chat has a line), patched when /clear starts another session, and
// removed at a clean exit; a kill -9 leaves it (another qwen removes a
// dead one when it lists them). So a live entry names its process's
// session exactly, and a stale one names a dead owner. ipcToken is a
// secret: it is never decoded, kept or logged.

// entry is what sessiond reads of one registry file.
type entry struct {
	path      string
	PID       int
	BootID    string // from procStart
	Ticks     uint64 // from procStart
	PIDNs     uint64
	SessionID string
	Cwd       string
	Kind      string
	StartedAt time.Time
}

// registryName: <pid>.json, or <pid>-<8 hex>.json for a process holding
// several sessions (Qwen's ACP daemon).
var registryName = regexp.MustCompile(`^([1-9][0-9]{0,9})(-[0-9a-f]{8})?\.json$`)

// maxEntryBytes bounds a registry file (Qwen's own bound is 64 KiB).
const maxEntryBytes = 64 << 10

// errNotEntry: the file is not a registry entry sessiond can use.
var errNotEntry = errors.New("not a session registry entry")

// parseEntry reads one registry file's bytes.
func parseEntry(name string, b []byte) (entry, error) {
	m := registryName.FindStringSubmatch(name)
	if m == nil {
		return entry{}, errNotEntry
	}
	var raw struct {
		SchemaVersion int     `json:"schemaVersion"`
		PID           int     `json:"pid"`
		ProcStart     *string `json:"procStart"`
		PIDNs         *uint64 `json:"pidNs"`
		SessionID     string  `json:"sessionId"`
		Cwd           string  `json:"cwd"`
		Kind          string  `json:"kind"`
		StartedAt     float64 `json:"startedAt"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return entry{}, fmt.Errorf("%w: %v", errNotEntry, err)
	}
	pid, _ := strconv.Atoi(m[1])
	switch {
	case raw.SchemaVersion != 1:
		return entry{}, fmt.Errorf("%w: schemaVersion %d (read: 1)", errNotEntry, raw.SchemaVersion)
	case raw.PID != pid:
		return entry{}, fmt.Errorf("%w: pid %d in %s", errNotEntry, raw.PID, name)
	case !validID(raw.SessionID):
		return entry{}, fmt.Errorf("%w: sessionId %q", errNotEntry, oneLine(raw.SessionID))
	}
	e := entry{PID: pid, SessionID: raw.SessionID, Cwd: raw.Cwd, Kind: raw.Kind}
	if raw.PIDNs != nil {
		e.PIDNs = *raw.PIDNs
	}
	if raw.StartedAt > 0 && raw.StartedAt < 1e15 {
		e.StartedAt = time.UnixMilli(int64(raw.StartedAt))
	}
	if raw.ProcStart != nil {
		boot, ticks, ok := strings.Cut(*raw.ProcStart, ":")
		t, err := strconv.ParseUint(ticks, 10, 64)
		if !ok || err != nil || boot == "" {
			return entry{}, fmt.Errorf("%w: procStart %q", errNotEntry, oneLine(*raw.ProcStart))
		}
		e.BootID, e.Ticks = boot, t
	}
	return e, nil
}

func oneLine(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}

// registry is the last reading of one home's sessions/ folder.
type registry struct {
	mtime    time.Time
	listedAt time.Time
	read     bool
	entries  []entry
	bad      []adapters.InputError // entries that could not be used
}

// readRegistry reads <root>/sessions/ again when it changed (every write
// is a rename into it, which changes its mtime), or was not settled, or
// at a full rescan. A folder that cannot be read is an error, and its
// last reading stands.
func readRegistry(root string, reg *registry, full bool, now time.Time) error {
	dir := filepath.Join(root, "sessions")
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		*reg = registry{read: true}
		return nil
	}
	if err != nil {
		return err
	}
	if reg.read && !full && fi.ModTime().Equal(reg.mtime) && kit.Settled(reg.mtime, reg.listedAt) {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	next := registry{mtime: fi.ModTime(), listedAt: now, read: true}
	for _, de := range ents {
		if !registryName.MatchString(de.Name()) || !de.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, de.Name())
		b, err := readSmall(p, maxEntryBytes)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the listing
		}
		if err == nil {
			var e entry
			if e, err = parseEntry(de.Name(), b); err == nil {
				e.path = p
				next.entries = append(next.entries, e)
				continue
			}
		}
		next.bad = append(next.bad, adapters.InputError{Input: p, Err: err})
	}
	*reg = next
	return nil
}

// readSmall reads a file of at most max bytes.
func readSmall(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%d bytes, more than a registry entry has (%d)", fi.Size(), max)
	}
	b := make([]byte, fi.Size())
	n, err := f.ReadAt(b, 0)
	if err != nil && n != len(b) {
		return nil, err
	}
	return b[:n], nil
}

// validID: a session id as Qwen names its chat file: a UUID, or what
// --session-id gave, as long as it is a plain file name.
func validID(id string) bool {
	if id == "" || len(id) > 200 || id[0] == '.' {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
