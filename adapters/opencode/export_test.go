package opencode

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Used only by tests.

// backups lists the backups of one database, newest first.
func (a *Adapter) backups(dbPath string) ([]string, error) {
	ents, err := os.ReadDir(a.backupDir(dbPath))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".db") {
			out = append(out, filepath.Join(a.backupDir(dbPath), e.Name()))
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(out)))
	return out, nil
}
