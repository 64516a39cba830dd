package readme

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the root of the repository this package is in.
func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("git rev-parse --show-toplevel: %v (the test copies the repository's files as git lists them)", err)
	}
	return strings.TrimSpace(string(out))
}

// cloneRepo makes a clean clone of the repository under t.TempDir() and
// returns its root.
//
// It copies exactly the files `git ls-files -co --exclude-standard` lists
// (tracked, and untracked but not ignored), rather than running git clone,
// because that proves the most for both who run it:
//   - in CI the checkout is clean, so the copy is HEAD, the tree a git
//     clone would give (less .git, which no README command needs);
//   - for a developer it is what the next commit will hold: a README or
//     code change is checked before it is committed, when the check is of
//     use, where git clone would test the last commit and pass or fail on
//     stale text.
//
// Either way nothing git ignores comes along (bin/, .venv, node_modules,
// countersign.db, build outputs): the copy is what a fresh machine has,
// which noLeaks asserts. What the copy cannot see is a new file a developer
// forgets to git add: it is in the copy but would be missing from the
// commit; CI's fresh checkout catches that.
func cloneRepo(t *testing.T) string {
	t.Helper()
	src := repoRoot(t)
	out, err := gitIn(src, "ls-files", "-z", "-co", "--exclude-standard")
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "countersign")
	n := 0
	for name := range strings.SplitSeq(strings.TrimRight(out, "\x00"), "\x00") {
		if name == "" {
			continue
		}
		copied, err := copyEntry(src, dst, name)
		if err != nil {
			t.Fatalf("copy %s: %v", name, err)
		}
		if copied {
			n++
		}
	}
	if n < 100 {
		t.Fatalf("git ls-files listed %d files: the listing is broken", n)
	}
	// What git ignores and the source holds now (a developer's bin/, .venv,
	// node_modules, databases) must not be in the copy.
	ignored, err := gitIn(src, "ls-files", "-z", "-o", "-i", "--exclude-standard", "--directory")
	if err != nil {
		t.Fatal(err)
	}
	var leaked []string
	for name := range strings.SplitSeq(strings.TrimRight(ignored, "\x00"), "\x00") {
		if name == "" {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dst, filepath.FromSlash(strings.TrimSuffix(name, "/")))); err == nil {
			leaked = append(leaked, name)
		}
	}
	if len(leaked) > 0 {
		t.Fatalf("the clone holds files git ignores in %s: %v", src, leaked)
	}
	if err := noLeaks(dst); err != nil {
		t.Fatal(err)
	}
	t.Logf("clone: %d files of %s in %s", n, src, dst)
	return dst
}

// gitIn runs git in dir and returns its standard output.
func gitIn(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return string(out), nil
}

// copyEntry copies src/name to dst/name: a regular file with its
// permissions, a symbolic link as a link. It reports false for a tracked
// file deleted from the work tree, which the next commit will not hold.
func copyEntry(src, dst, name string) (bool, error) {
	from := filepath.Join(src, filepath.FromSlash(name))
	to := filepath.Join(dst, filepath.FromSlash(name))
	fi, err := os.Lstat(from)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return false, err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(from)
		if err != nil {
			return false, err
		}
		return true, os.Symlink(target, to)
	case fi.Mode().IsRegular():
		return true, copyFile(from, to, fi.Mode().Perm())
	}
	// A submodule is listed as its folder: a clone would need git submodule
	// update, which the README does not ask for.
	return false, fmt.Errorf("%s is neither a file nor a link (%v): a submodule?", name, fi.Mode().Type())
}

func copyFile(from, to string, perm fs.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// noLeaks walks a fresh clone for what only a used checkout has: the
// README's and the Makefile's outputs and the developer's environments,
// named here so that the assertion holds even where the source has none of
// them at the moment (a CI checkout before make test ran).
func noLeaks(root string) error {
	var leaked []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		base := path.Base(rel)
		switch {
		case rel == "bin", rel == ".venv", rel == ".testlog", rel == ".git", base == "node_modules":
			leaked = append(leaked, rel)
			return filepath.SkipDir
		case !d.IsDir() && (strings.HasSuffix(base, ".db") || strings.HasSuffix(base, ".db-wal") ||
			strings.HasSuffix(base, ".db-shm") || strings.HasSuffix(base, ".test")):
			leaked = append(leaked, rel)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("walk %s: %w", root, err)
	}
	if len(leaked) > 0 {
		return fmt.Errorf("a clean clone would not hold %v", leaked)
	}
	return nil
}
