// Package fuzzcorpus checks that every fuzz target of the module has a seed
// corpus committed beside it (testdata/fuzz/FuzzXxx), which go test runs as
// unit tests and make fuzz-smoke starts fuzzing from.
package fuzzcorpus_test

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var fuzzFunc = regexp.MustCompile(`^func (Fuzz[A-Za-z0-9_]*)\(`)

// minSeeds is the fewest corpus files a target may have committed.
const minSeeds = 3

func TestEveryFuzzTargetHasACommittedCorpus(t *testing.T) {
	root := filepath.Join("..", "..")
	targets := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", ".git", "testdata":
				return filepath.SkipDir
			}
			if rel, _ := filepath.Rel(root, path); rel == filepath.Join("bench", "river") {
				return filepath.SkipDir // a module of its own
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			m := fuzzFunc.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			targets++
			dir := filepath.Join(filepath.Dir(path), "testdata", "fuzz", m[1])
			entries, err := os.ReadDir(dir)
			if err != nil || len(entries) < minSeeds {
				t.Errorf("%s: %s has %d seed files in %s, want at least %d (run it with -fuzz and commit what it found there)", path, m[1], len(entries), dir, minSeeds)
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if targets < 20 {
		t.Fatalf("found only %d fuzz targets; the walk missed some", targets)
	}
	t.Logf("%d fuzz targets, each with a committed seed corpus", targets)
}
