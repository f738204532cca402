package opencode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
)

// legacyReader reads the JSON storage of OpenCode up to 1.1.x:
// storage/session/<projectID>/<sessionID>.json,
// storage/message/<sessionID>/<messageID>.json and
// storage/part/<messageID>/<partID>.json. A session is read again only when
// its file, its message directory or its last assistant message's part
// directory changed, or while it has work in flight.
type legacyReader struct {
	root string // <data dir>/storage
	log  *zap.Logger

	cache map[string]*legacyEntry
	// skipped are the project dirs and session files the last read could
	// not use, with why: named in health as warnings.
	skipped []adapters.InputError
}

type legacyEntry struct {
	data    *sessionData
	stamp   legacyStamp
	project string
}

// legacyStamp is what decides whether a session must be read again.
type legacyStamp struct {
	sessMod  time.Time
	sessSize int64
	msgMod   time.Time
	partMod  time.Time
}

// maxLegacyFileSize bounds one JSON file read from legacy storage.
const maxLegacyFileSize = 16 << 20

func (r *legacyReader) present() bool {
	fi, err := os.Stat(filepath.Join(r.root, "session"))
	return err == nil && fi.IsDir()
}

// read scans the storage. Unreadable single files are skipped (logged);
// only an unreadable storage/session directory is an error.
func (r *legacyReader) read(ctx context.Context) error {
	sessDir := filepath.Join(r.root, "session")
	projects, err := os.ReadDir(sessDir)
	if err != nil {
		return fmt.Errorf("read legacy storage: %w", err)
	}
	next := map[string]*legacyEntry{}
	r.skipped = nil
	for _, pd := range projects {
		if !pd.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(sessDir, pd.Name()))
		if err != nil {
			r.log.Debug("skipping unreadable legacy project dir", zap.String("dir", pd.Name()), zap.Error(err))
			r.skipped = append(r.skipped, adapters.InputError{Input: filepath.Join(sessDir, pd.Name()), Err: fmt.Errorf("legacy project dir skipped: %w", err)})
			continue
		}
		for _, f := range files {
			if err := ctx.Err(); err != nil {
				return err
			}
			name := f.Name()
			if f.IsDir() || !strings.HasSuffix(name, ".json") {
				continue
			}
			id := strings.TrimSuffix(name, ".json")
			path := filepath.Join(sessDir, pd.Name(), name)
			e, err := r.readSession(id, pd.Name(), path)
			if err != nil {
				r.log.Debug("skipping unreadable legacy session", zap.String("file", path), zap.Error(err))
				r.skipped = append(r.skipped, adapters.InputError{Input: path, Err: fmt.Errorf("legacy session skipped: %w", err)})
				continue
			}
			next[e.data.ID] = e
		}
	}
	r.cache = next
	return nil
}

func modOf(path string) (time.Time, int64) {
	fi, err := os.Stat(path)
	if err != nil {
		return time.Time{}, -1
	}
	return fi.ModTime(), fi.Size()
}

// readSession reads one session file, its last assistant message and that
// message's in-flight tool calls; the cached entry when nothing its stamp
// covers changed and it had no work in flight.
func (r *legacyReader) readSession(id, project, path string) (*legacyEntry, error) {
	var st legacyStamp
	st.sessMod, st.sessSize = modOf(path)
	if st.sessSize < 0 {
		return nil, fmt.Errorf("stat %s: gone", path)
	}
	msgDir := filepath.Join(r.root, "message", id)
	st.msgMod, _ = modOf(msgDir)
	if old := r.cache[id]; old != nil && old.project == project && !old.data.inFlight() {
		st.partMod = old.stamp.partMod
		if la := old.data.LastAssistant; la != nil {
			st.partMod, _ = modOf(filepath.Join(r.root, "part", la.ID))
		}
		if st == old.stamp {
			return old, nil
		}
	}
	b, err := readSmall(path)
	if err != nil {
		return nil, err
	}
	ls, err := parseLegacySession(b)
	if err != nil {
		return nil, err
	}
	if ls.ID != id {
		return nil, fmt.Errorf("file name says %s, content says %s", id, ls.ID)
	}
	s := &sessionData{
		ID: ls.ID, ProjectID: ls.ProjectID, ParentID: ls.ParentID, Directory: ls.Directory, Title: ls.Title, Version: ls.Version,
		Created: ls.Time.Created.t, Updated: ls.Time.Updated.t, Archived: ls.Time.Archived.t,
		Source: r.root, legacy: true,
	}
	s.touch(s.Updated)
	s.touch(st.sessMod)

	r.readLastAssistant(s, msgDir)
	if s.LastAssistant != nil {
		st.partMod = r.readInFlightParts(s)
	}
	return &legacyEntry{data: s, stamp: st, project: project}, nil
}

// readLastAssistant finds the session's last assistant message in msgDir.
// Message ids ascend with time: the newest are walked first.
func (r *legacyReader) readLastAssistant(s *sessionData, msgDir string) {
	names, _ := readNames(msgDir)
	for i, n := len(names)-1, 0; i >= 0 && n < maxAssistantScan; i, n = i-1, n+1 {
		mp := filepath.Join(msgDir, names[i])
		mb, _, err := readTouching(s, mp)
		if err != nil {
			continue
		}
		m, err := parseMessage(mb)
		if err != nil {
			r.log.Debug("skipping unparseable legacy message", zap.String("file", mp), zap.Error(err))
			continue
		}
		if m.Assistant() {
			if m.ID == "" {
				m.ID = strings.TrimSuffix(names[i], ".json")
			}
			m.SessionID = s.ID
			s.LastAssistant = &m
			return
		}
	}
}

// readInFlightParts reads the in-flight tool calls among the parts of the
// session's last assistant message and returns their directory's
// modification time.
func (r *legacyReader) readInFlightParts(s *sessionData) time.Time {
	la := s.LastAssistant
	partDir := filepath.Join(r.root, "part", la.ID)
	partMod, _ := modOf(partDir)
	pnames, _ := readNames(partDir)
	for _, pn := range pnames {
		pp := filepath.Join(partDir, pn)
		pb, mod, err := readTouching(s, pp)
		if err != nil {
			continue
		}
		p, err := parsePart(pb)
		if err != nil || !p.InFlight() {
			continue
		}
		if p.ID == "" {
			p.ID = strings.TrimSuffix(pn, ".json")
		}
		p.MessageID, p.SessionID = la.ID, s.ID
		s.Tools = append(s.Tools, toolCall{ocPart: p, Created: p.Start, Updated: mod})
	}
	return partMod
}

// readTouching reads a file of s's storage, whose modification time
// (returned) counts as a write of s even when the file cannot be read.
func readTouching(s *sessionData, path string) ([]byte, time.Time, error) {
	mod, _ := modOf(path)
	s.touch(mod)
	b, err := readSmall(path)
	return b, mod, err
}

// readNames lists the .json files of a directory, sorted.
func readNames(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxLegacyFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxLegacyFileSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxLegacyFileSize)
	}
	return b, nil
}

// legacyExists looks for storage/session/*/<id>.json.
func legacyExists(root, id string) (bool, error) {
	projects, err := os.ReadDir(filepath.Join(root, "session"))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, p := range projects {
		if !p.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, "session", p.Name(), id+".json")); err == nil {
			return true, nil
		}
	}
	return false, nil
}

// watchDirs are the legacy directories whose changes matter: each project
// directory of storage/session, and the message and part directories of
// sessions with work in flight.
func (r *legacyReader) watchDirs(limit int) []string {
	var out []string
	if ents, err := os.ReadDir(filepath.Join(r.root, "session")); err == nil {
		out = append(out, filepath.Join(r.root, "session"))
		for _, e := range ents {
			if e.IsDir() && len(out) < limit {
				out = append(out, filepath.Join(r.root, "session", e.Name()))
			}
		}
	}
	for _, e := range r.cache {
		if len(out) >= limit {
			break
		}
		if e.data.inFlight() {
			out = append(out, filepath.Join(r.root, "message", e.data.ID))
			if la := e.data.LastAssistant; la != nil {
				out = append(out, filepath.Join(r.root, "part", la.ID))
			}
		}
	}
	return out
}
