// Package migrations reads a driver's embedded, forward-only SQL migrations
// and pins the released ones, so that an applied migration is never edited.
// Each driver applies them its own way (its own locking and transactions).
package migrations

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// File is one migration: NNNN_name.sql, numbered from 1 without gaps.
type File struct {
	Version int
	Name    string // e.g. 0001_init.sql
	SQL     string
}

// Load reads the migrations in dir of fsys, in version order.
func Load(fsys fs.FS, dir string) ([]File, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []File
	for _, e := range entries { // ReadDir sorts by name
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v != len(out)+1 || !strings.HasSuffix(e.Name(), ".sql") {
			return nil, fmt.Errorf("migration %s: want a name %04d_<name>.sql", e.Name(), len(out)+1)
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, File{Version: v, Name: e.Name(), SQL: string(b)})
	}
	return out, nil
}

// Sum is the hex SHA-256 of a migration's SQL.
func Sum(f File) string {
	s := sha256.Sum256([]byte(f.SQL))
	return hex.EncodeToString(s[:])
}

// CheckPinned compares every migration with its pinned sum (file name → hex
// SHA-256) and returns one problem per migration that is new and unpinned,
// or was edited after release.
func CheckPinned(files []File, pinned map[string]string) []string {
	var problems []string
	for _, f := range files {
		want, ok := pinned[f.Name]
		switch got := Sum(f); {
		case !ok:
			problems = append(problems, fmt.Sprintf("migration %s has no pinned sum; pin %q", f.Name, got))
		case got != want:
			problems = append(problems, fmt.Sprintf("migration %s was edited (sha256 %s, pinned %s): add a new migration instead", f.Name, got, want))
		}
	}
	for name := range pinned {
		found := false
		for _, f := range files {
			found = found || f.Name == name
		}
		if !found {
			problems = append(problems, fmt.Sprintf("released migration %s is missing", name))
		}
	}
	return problems
}
