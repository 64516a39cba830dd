package clients

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// The node tools run without touching the network: no telemetry, no update
// checks. npm ci alone reaches the registry, and only when node_modules is
// not what package-lock.json pins.
var quietEnv = []string{
	"REDOCLY_TELEMETRY=off",
	"REDOCLY_SUPPRESS_UPDATE_NOTICE=true",
	"NO_UPDATE_NOTIFIER=1",
	"SCARF_ANALYTICS=false",
	"DO_NOT_TRACK=1",
	"NODE_NO_WARNINGS=1",
}

var (
	toolsOnce sync.Once
	toolsErr  error
)

// needNode returns this folder's absolute path once node and the pinned npm
// packages are there, running npm ci first if node_modules does not hold
// what package.json pins. Without node the test skips, except in CI, where
// a missing tool is a failure.
func needNode(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not on PATH; CI must have Node.js 20 and npm (see .ci/run)", tool)
			}
			t.Skipf("%s is not on PATH: these tests drive Node.js clients", tool)
		}
	}
	toolsOnce.Do(func() { toolsErr = installPinned(dir) })
	if toolsErr != nil {
		t.Fatalf("the npm packages of test/clients: %v", toolsErr)
	}
	return dir
}

// installPinned runs npm ci unless every package.json dependency is
// installed at its pinned version.
func installPinned(dir string) error {
	missing, err := unpinned(dir)
	if err != nil || len(missing) == 0 {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), quietEnv...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm ci (for %v): %w\n%s", missing, err, out)
	}
	if missing, err = unpinned(dir); err == nil && len(missing) > 0 {
		err = fmt.Errorf("after npm ci, still not at their pinned versions: %v", missing)
	}
	return err
}

// unpinned lists the dependencies of package.json that node_modules lacks
// or holds at another version.
func unpinned(dir string) ([]string, error) {
	var pkg struct {
		DevDependencies map[string]string `json:"devDependencies"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		return nil, fmt.Errorf("package.json: %w", err)
	}
	var missing []string
	for name, want := range pkg.DevDependencies {
		var got struct {
			Version string `json:"version"`
		}
		b, err := os.ReadFile(filepath.Join(dir, "node_modules", name, "package.json"))
		if err == nil {
			err = json.Unmarshal(b, &got)
		}
		if err != nil || got.Version != want {
			missing = append(missing, name+"@"+want)
		}
	}
	return missing, nil
}

// npmBin runs one of node_modules/.bin's commands in dir and returns its
// standard output and error; a non-zero exit is returned as err, with the
// output kept, since linters exit 1 on findings.
func npmBin(t *testing.T, dir, name string, args ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	return npmBinIn(t, dir, dir, name, args...)
}

// npmBinIn is npmBin run in the working directory cwd, away from this
// folder's tool configurations (redocly.yaml) where a tool must run with
// its defaults.
func npmBinIn(t *testing.T, dir, cwd, name string, args ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", name), args...)
	cmd.Dir = cwd
	cmd.Env = append(os.Environ(), quietEnv...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.Bytes(), errOut.Bytes(), err
}
