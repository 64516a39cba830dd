package typescript

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/nodetest"
	"github.com/countersign/countersign/internal/servetest"
)

// TestClient runs the package's node tests (npm test: tsc, then node
// --test) against `countersign serve` with the demo configuration on a
// SQLite file of its own, and, for settle and renew, against a second
// one serving testdata/caller.yaml's caller-executed actions.
func TestClient(t *testing.T) {
	dir := nodetest.Need(t, ".", "this test runs the TypeScript client's node tests")
	bin := servetest.Build(t)
	url := servetest.Serve(t, bin, []string{"--store", servetest.SQLiteStore(t)})
	config, err := filepath.Abs("testdata/caller.yaml")
	if err != nil {
		t.Fatal(err)
	}
	caller := servetest.Serve(t, bin, []string{"--config", config, "--store", servetest.SQLiteStore(t)})
	servetest.NPMTest(t, dir, 3*time.Minute, "COUNTERSIGN_URL="+url, "COUNTERSIGN_CALLER_URL="+caller)
}
