package claude

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/claude/transcript"
	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/proc"
)

// registryEntry is one <root>/sessions/<pid>.json file: what a top-level
// claude process says about itself while it runs. It is evidence, never
// truth: after kill -9 the file stays forever, often saying "busy".
type registryEntry struct {
	PID       int
	SessionID string
	Cwd       string
	// ProcStart is the process start as Claude Code recorded it: on Linux
	// field 22 of /proc/<pid>/stat as a decimal string, compared verbatim;
	// on macOS `ps -o lstart` text.
	ProcStart string
	StartedAt time.Time
	Version   string
	Kind      string
	// PIDDomain says which machine and PID namespace the pid belongs to:
	// "linux:<machine-id>:pid:[<ns inode>]" on Linux (see domain.go). It
	// is not a boot id.
	PIDDomain string
	Name      string
	// Status is busy, idle or waiting; "" when the host never writes it.
	Status string
	// WaitingFor says what a waiting session waits for (shortened).
	WaitingFor      string
	UpdatedAt       time.Time
	StatusUpdatedAt time.Time
	// drift is what the entry holds that sessiond does not understand: a
	// status or waitingFor value, or a field of another JSON type, than
	// the versions it knows write.
	drift kit.Seen
}

// registryFieldTypes are the JSON types Claude Code (2.1.328) writes the
// registry's fields as ('"' a string, '0' a number). parseRegistry
// accepts the other (a number as text, a time as RFC 3339), and counts
// it as drift.
var registryFieldTypes = map[string]byte{
	"pid": '0', "sessionId": '"', "cwd": '"', "procStart": '"', "version": '"', "kind": '"',
	"pidDomain": '"', "name": '"', "status": '"', "waitingFor": '"',
	"startedAt": '0', "updatedAt": '0', "statusUpdatedAt": '0',
}

// knownWaitingFor are the waitingFor words Claude Code writes (2.1.328,
// and 2.1.332 read from its package).
var knownWaitingFor = map[string]bool{"permission prompt": true, "input needed": true, "dialog open": true,
	"sandbox request": true, "worker request": true, "goal proposal": true}

// entryDrift is what an entry holds that sessiond does not understand.
func entryDrift(raw map[string]json.RawMessage, e *registryEntry) kit.Seen {
	var seen kit.Seen
	for field, want := range registryFieldTypes {
		v := bytes.TrimSpace(raw[field])
		if len(v) == 0 || v[0] == 'n' {
			continue
		}
		got := v[0]
		if got == '-' || ('0' <= got && got <= '9') {
			got = '0'
		}
		if got != want {
			seen.Add(adapters.DriftFieldType, field+": "+jsonTypeName(got))
		}
	}
	if _, known := registryActivity(e.Status); e.Status != "" && !known {
		seen.Add(adapters.DriftStatus, e.Status)
	}
	if e.WaitingFor != "" && !knownWaitingFor[e.WaitingFor] {
		seen.Add(adapters.DriftWaitingFor, e.WaitingFor)
	}
	return seen
}

func jsonTypeName(c byte) string {
	switch c {
	case '"':
		return "string"
	case '0':
		return "number"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "bool"
	}
	return "?"
}

// errBadRegistry is wrapped by parseRegistry's errors.
var errBadRegistry = errors.New("bad registry entry")

// registryName matches the only file names that are registry entries. The
// <pid>.<hash>.key files beside them hold secrets and are never opened.
var registryName = regexp.MustCompile(`^[0-9]+\.json$`)

// isRegistryName reports whether a file name in <root>/sessions/ is a
// registry entry.
func isRegistryName(name string) bool { return registryName.MatchString(name) }

// maxRegistryBytes bounds a registry file; real ones are under 1 KB.
const maxRegistryBytes = 1 << 20

// parseRegistry parses one registry file. Fields it does not know are
// ignored; numbers written as strings (or the reverse) are accepted. Only a
// file that is not a JSON object or names no positive pid is an error.
func parseRegistry(b []byte) (registryEntry, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return registryEntry{}, fmt.Errorf("%w: %v", errBadRegistry, err)
	}
	if raw == nil {
		return registryEntry{}, fmt.Errorf("%w: not an object", errBadRegistry)
	}
	var e registryEntry
	pid, ok := flexInt(raw["pid"])
	if !ok || pid <= 0 || pid > 1<<31-1 {
		return registryEntry{}, fmt.Errorf("%w: no valid pid", errBadRegistry)
	}
	e.PID = int(pid)
	e.SessionID = flexString(raw["sessionId"])
	e.Cwd = flexString(raw["cwd"])
	e.ProcStart = flexString(raw["procStart"])
	e.Version = flexString(raw["version"])
	e.Kind = flexString(raw["kind"])
	e.PIDDomain = flexString(raw["pidDomain"])
	e.Name = flexString(raw["name"])
	e.Status = strings.ToLower(flexString(raw["status"]))
	e.StartedAt = flexTime(raw["startedAt"])
	e.UpdatedAt = flexTime(raw["updatedAt"])
	e.StatusUpdatedAt = flexTime(raw["statusUpdatedAt"])
	if w := raw["waitingFor"]; len(w) > 0 {
		if s := flexString(w); s != "" {
			e.WaitingFor = transcript.Shorten(s, transcript.InputMax)
		} else {
			var buf bytes.Buffer
			if json.Compact(&buf, w) == nil && buf.String() != "null" {
				e.WaitingFor = transcript.Shorten(buf.String(), transcript.InputMax)
			}
		}
	}
	e.drift = entryDrift(raw, &e)
	return e, nil
}

// flexString reads a JSON string, or a number as its decimal text.
func flexString(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// flexInt reads a JSON integer, or a string holding one.
func flexInt(raw json.RawMessage) (int64, bool) {
	s := flexString(raw)
	if s == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// flexTime reads a time written as milliseconds since the epoch (what
// Claude Code writes) or as RFC 3339 text.
func flexTime(raw json.RawMessage) time.Time {
	s := flexString(raw)
	if s == "" {
		return time.Time{}
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms <= 0 || ms > 1<<53 {
			return time.Time{}
		}
		return time.UnixMilli(ms)
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t
	}
	return time.Time{}
}

// parseLstart reads `ps -o lstart` text ("Mon Jan  2 15:04:05 2006", local
// time), which Claude Code records as procStart on macOS.
func parseLstart(s string) (time.Time, bool) {
	t, err := time.ParseInLocation("Mon Jan 2 15:04:05 2006", strings.Join(strings.Fields(s), " "), time.Local)
	return t, err == nil
}

// procStartMatches reports whether a registry procStart names the process
// whose start is ticks (the snapshot's StartTicks). Linux: the decimal is
// compared verbatim. macOS: lstart text is compared, to the second, with
// ticks as microseconds since the epoch.
func procStartMatches(procStart string, ticks uint64) bool {
	if procStart == "" {
		return false
	}
	if isDigits(procStart) {
		return procStart == strconv.FormatUint(ticks, 10)
	}
	t, ok := parseLstart(procStart)
	if !ok || ticks > 1<<62 {
		return false
	}
	d := time.UnixMicro(int64(ticks)).Sub(t)
	return d >= 0 && d < time.Second
}

// procStartTicks converts a procStart to StartTicks for an identity that
// could not be validated: the decimal on Linux; on macOS the lstart text to
// microseconds (second precision, so such an identity probes Dead unless
// validated, which is the safe side). ok is false when it cannot be read.
func procStartTicks(procStart string) (uint64, bool) {
	if procStart == "" {
		return 0, false
	}
	if isDigits(procStart) {
		v, err := strconv.ParseUint(procStart, 10, 64)
		return v, err == nil
	}
	t, ok := parseLstart(procStart)
	if !ok || t.UnixMicro() <= 0 {
		return 0, false
	}
	return uint64(t.UnixMicro()), true
}

func isDigits(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// regFile is one registry entry file as last read.
type regFile struct {
	path   string
	size   int64
	mtime  time.Time
	dev    uint64
	ino    uint64
	readAt time.Time
	entry  *registryEntry
	// bad is why the content was not used (unparseable, names another
	// pid), nil when it was.
	bad error
	// host is the host process an entry of another PID namespace was
	// validated at, and hostFor the entry's process as the entry names
	// it: kept across the file's rewrites while it names that process.
	host    proc.Identity
	hostFor entryProcess
}

// entryProcess is the process a registry entry names, as it names it.
type entryProcess struct {
	pid       int
	domain    string
	procStart string
	startedAt int64
}

func processOf(e *registryEntry) entryProcess {
	return entryProcess{pid: e.PID, domain: e.PIDDomain, procStart: e.ProcStart, startedAt: e.StartedAt.UnixMilli()}
}

// hostOf is the host identity e's process was found at, zero when it was
// not (or the file now names another process).
func (rf *regFile) hostOf(e *registryEntry) proc.Identity {
	if rf.host.IsZero() || rf.hostFor != processOf(e) {
		return proc.Identity{}
	}
	return rf.host
}

func (rf *regFile) setHost(e *registryEntry, id proc.Identity) {
	rf.host, rf.hostFor = id, processOf(e)
}

func (a *Adapter) scanRegistry(r *rootState, full bool) []adapters.InputError {
	dir := filepath.Join(r.path, "sessions")
	r.regsOK = false
	fi, err := a.fs.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.sessionsDir = dirState{}
		clear(r.regs)
		r.regsOK = true
		return nil
	case err != nil:
		return []adapters.InputError{{Input: dir, Err: err}}
	}
	r.sessionsDir.exists = true
	if r.sessionsDir.needList(fi, full) {
		ents, err := a.fs.ReadDir(dir)
		if err != nil {
			return []adapters.InputError{{Input: dir, Err: err}}
		}
		seen := make(map[string]bool, len(ents))
		for _, e := range ents {
			name := e.Name()
			// Only <pid>.json; the <pid>.<hash>.key secrets never match.
			if !isRegistryName(name) || !e.Type().IsRegular() {
				continue
			}
			seen[name] = true
			if r.regs[name] == nil {
				r.regs[name] = &regFile{path: filepath.Join(dir, name)}
			}
		}
		for name := range r.regs {
			if !seen[name] {
				delete(r.regs, name)
			}
		}
		r.sessionsDir.listedNow(fi)
	}
	r.regsOK = true
	var errs []adapters.InputError
	for name, rf := range r.regs {
		if err := a.readRegistry(rf); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				delete(r.regs, name)
				continue
			}
			errs = append(errs, adapters.InputError{Input: rf.path, Err: err})
		}
	}
	return errs
}

// readRegistry re-reads a registry file when its stat changed.
func (a *Adapter) readRegistry(rf *regFile) error {
	fi, err := a.fs.Stat(rf.path)
	if err != nil {
		rf.entry = nil
		return err
	}
	dev, ino, _ := kit.FileID(fi)
	same := fi.Size() == rf.size && fi.ModTime().Equal(rf.mtime) && dev == rf.dev && ino == rf.ino
	if same && !rf.readAt.IsZero() && kit.Settled(rf.mtime, rf.readAt) {
		return nil
	}
	rf.size, rf.mtime, rf.dev, rf.ino, rf.readAt = fi.Size(), fi.ModTime(), dev, ino, time.Now()
	rf.entry, rf.bad = nil, nil
	if fi.Size() > maxRegistryBytes {
		return fmt.Errorf("registry entry of %d bytes: over the %d byte limit", fi.Size(), maxRegistryBytes)
	}
	f, err := a.fs.Open(rf.path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, fi.Size())
	n, err := transcript.ReadAtFull(countingFile{f, &a.bytesRead}, buf, 0)
	if err != nil {
		return err
	}
	e, err := parseRegistry(buf[:n])
	if err != nil {
		// Probably caught mid-write: the next write changes the stat. Named
		// as a warning once it stays so (see warnings).
		a.log.Debug("skipping registry entry", zap.String("path", rf.path), zap.Error(err))
		rf.bad = fmt.Errorf("registry entry skipped: %w", err)
		return nil
	}
	if want := strings.TrimSuffix(filepath.Base(rf.path), ".json"); strconv.Itoa(e.PID) != want {
		a.log.Debug("registry entry names another pid than its file; skipping", zap.String("path", rf.path))
		rf.bad = fmt.Errorf("registry entry skipped: it names pid %d, its file name pid %s", e.PID, want)
		return nil
	}
	rf.entry = &e
	a.regDrift.Set(rf.path, "registry entry", e.Version, e.drift)
	return nil
}
