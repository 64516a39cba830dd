package nodetest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// QuietEnv keeps the node tools off the network: npm ci alone reaches the
// registry, and only when node_modules is not what the lockfile pins.
var QuietEnv = []string{
	"REDOCLY_TELEMETRY=off",
	"REDOCLY_SUPPRESS_UPDATE_NOTICE=true",
	"NO_UPDATE_NOTIFIER=1",
	"SCARF_ANALYTICS=false",
	"DO_NOT_TRACK=1",
	"NODE_NO_WARNINGS=1",
	"npm_config_update_notifier=false",
}

var (
	mu        sync.Mutex
	installed = map[string]error{} // folder → the outcome of its install, once per process
)

// Need returns dir's absolute path once node, npm and dir's pinned npm
// packages are there, running npm ci in dir first (once per process) if
// node_modules does not hold what package.json pins. Without node or npm t
// skips, except when the environment variable CI is set: then it fails.
// what names the tests in the skip message.
func Need(t testing.TB, dir, what string) string {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not on PATH; CI must have Node.js 20 and npm (see .ci/run)", tool)
			}
			t.Skipf("%s is not on PATH: %s", tool, what)
		}
	}
	mu.Lock()
	err, done := installed[abs]
	if !done {
		err = InstallPinned(abs)
		installed[abs] = err
	}
	mu.Unlock()
	if err != nil {
		t.Fatalf("the npm packages of %s: %v", abs, err)
	}
	return abs
}

// InstallPinned runs npm ci in dir unless every devDependency of its
// package.json is in node_modules at its pinned version.
func InstallPinned(dir string) error {
	missing, err := Unpinned(dir)
	if err != nil || len(missing) == 0 {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), QuietEnv...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm ci (for %v): %w\n%s", missing, err, out)
	}
	if missing, err = Unpinned(dir); err == nil && len(missing) > 0 {
		err = fmt.Errorf("after npm ci, still not at their pinned versions: %v", missing)
	}
	return err
}

// Unpinned lists the devDependencies of dir's package.json that
// node_modules lacks or holds at another version. A "file:" dependency (a
// package of this repository, linked by npm ci) has no version to pin: it
// only has to be there.
func Unpinned(dir string) ([]string, error) {
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
		if err == nil && strings.HasPrefix(want, "file:") {
			continue
		}
		if err != nil || got.Version != want {
			missing = append(missing, name+"@"+want)
		}
	}
	return missing, nil
}
