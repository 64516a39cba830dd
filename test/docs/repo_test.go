package docs

import (
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode"
)

// root is the repository's root, from this package's folder.
const root = "../.."

// repo is the repository's tracked files, read once.
type repo struct {
	files []string        // slash-separated paths, relative to the root
	set   map[string]bool // the same, as a set
	dirs  map[string]bool // every folder that holds a tracked file
}

var (
	repoOnce sync.Once
	repoVal  *repo
	repoErr  error
)

// tracked returns the repository's tracked files (git ls-files). Without
// git t skips, except in CI, where it fails.
func tracked(t *testing.T) *repo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("git is not on PATH; CI must have it")
		}
		t.Skip("git is not on PATH: the documents are checked over git ls-files")
	}
	repoOnce.Do(func() {
		cmd := exec.Command("git", "ls-files", "-z")
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			repoErr = err
			return
		}
		r := &repo{set: map[string]bool{}, dirs: map[string]bool{}}
		for f := range strings.SplitSeq(strings.TrimRight(string(out), "\x00"), "\x00") {
			if f == "" {
				continue
			}
			// A file deleted in the work tree but not yet in the index is
			// not there for a reader.
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(f))); err != nil {
				continue
			}
			r.files = append(r.files, f)
			r.set[f] = true
			for d := path.Dir(f); d != "."; d = path.Dir(d) {
				r.dirs[d] = true
			}
		}
		repoVal = r
	})
	if repoErr != nil {
		t.Fatalf("git ls-files in %s: %v", root, repoErr)
	}
	if len(repoVal.files) < 100 {
		t.Fatalf("git ls-files listed %d files: the listing is broken", len(repoVal.files))
	}
	return repoVal
}

// read returns a tracked file's content, and whether it is text.
func read(t *testing.T, name string) ([]byte, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	head := b[:min(len(b), 8000)]
	return b, !bytes.ContainsRune(head, 0)
}

// resolve returns target (a slash-separated path, relative to the file
// from or to the root when fromRoot) cleaned, and whether it stays inside
// the repository.
func resolve(from, target string, fromRoot bool) (string, bool) {
	base := path.Dir(from)
	if fromRoot || strings.HasPrefix(target, "/") {
		base = "."
	}
	p := path.Clean(path.Join(base, strings.TrimPrefix(target, "/")))
	return p, p != ".." && !strings.HasPrefix(p, "../")
}

// exists reports whether p is a tracked file or a folder holding one.
func (r *repo) exists(p string) bool {
	return r.set[p] || r.dirs[p] || p == "."
}

// lineOf returns the 1-based line of offset i in b.
func lineOf(b []byte, i int) int {
	return bytes.Count(b[:i], []byte{'\n'}) + 1
}

// slug is the anchor GitHub gives a heading: its text lower-cased, without
// what is neither a letter, a number, a space, a hyphen nor an underscore,
// spaces made hyphens.
func slug(heading string) string {
	heading = mdLink.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	mdLink    = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	mdHeading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	mdFence   = regexp.MustCompile("^\\s{0,3}(```|~~~)")
)

// anchors returns the anchors of a Markdown file's headings, numbered as
// GitHub numbers repeated ones (-1, -2, …).
func anchors(md []byte) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for line := range strings.SplitSeq(string(md), "\n") {
		if mdFence.MatchString(line) {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		m := mdHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}
