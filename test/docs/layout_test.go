package docs

import (
	"bytes"
	"path"
	"slices"
	"strings"
	"testing"
)

// TestLayoutNamesEveryPackage: README.md's Layout table names every folder
// that holds Go code, so that a reader finds each package there: as
// `dir/` (or `dir`) in a row, or as `name/` in the row of its parent
// folder (`channels/slack/`'s row names `slacktest/`).
func TestLayoutNamesEveryPackage(t *testing.T) {
	r := tracked(t)
	readme, _ := read(t, "README.md")
	section, ok := layoutSection(readme)
	if !ok {
		t.Fatal(`README.md has no "## Layout" section`)
	}
	var missing []string
	for _, d := range packageDirs(r) {
		if !layoutNames(section, d) {
			missing = append(missing, d)
		}
	}
	if len(missing) > 0 {
		t.Errorf("README.md's Layout table does not name these folders of Go code (add a row, or name them in their parent's row):\n  %s",
			strings.Join(missing, "\n  "))
	}
}

// packageDirs returns the folders that hold a tracked .go file, but for
// the root (the engine's row is "*.go (root)") and test data.
func packageDirs(r *repo) []string {
	seen := map[string]bool{}
	for _, f := range r.files {
		d := path.Dir(f)
		if !strings.HasSuffix(f, ".go") || d == "." || slices.Contains(strings.Split(d, "/"), "testdata") {
			continue
		}
		seen[d] = true
	}
	dirs := make([]string, 0, len(seen))
	for d := range seen {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	return dirs
}

// layoutSection returns README's "## Layout" section, up to the next
// second-level heading.
func layoutSection(readme []byte) ([]byte, bool) {
	_, rest, ok := bytes.Cut(readme, []byte("\n## Layout\n"))
	if !ok {
		return nil, false
	}
	if i := bytes.Index(rest, []byte("\n## ")); i >= 0 {
		rest = rest[:i]
	}
	return rest, true
}

// layoutNames reports whether section names folder d: `d/` or `d` in a
// row, or `base/` in a row that names d's parent.
func layoutNames(section []byte, d string) bool {
	for row := range bytes.SplitSeq(section, []byte("\n")) {
		if !bytes.HasPrefix(row, []byte("|")) {
			continue
		}
		if bytes.Contains(row, []byte("`"+d+"/`")) || bytes.Contains(row, []byte("`"+d+"`")) {
			return true
		}
		parent, base := path.Split(d)
		if parent != "" && bytes.Contains(row, []byte("`"+parent+"`")) && bytes.Contains(row, []byte("`"+base+"/`")) {
			return true
		}
	}
	return false
}
