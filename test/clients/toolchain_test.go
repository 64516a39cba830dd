package clients

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/nodetest"
)

// quietEnv keeps the node tools off the network (nodetest.QuietEnv).
var quietEnv = nodetest.QuietEnv

// needNode returns this folder's absolute path once node and the pinned npm
// packages are there (nodetest.Need).
func needNode(t *testing.T) string {
	t.Helper()
	return nodetest.Need(t, ".", "these tests drive Node.js clients")
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
