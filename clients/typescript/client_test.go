package typescript

import (
	"testing"
	"time"

	"github.com/countersign/countersign/internal/nodetest"
	"github.com/countersign/countersign/internal/servetest"
)

// TestClient runs the package's node tests (npm test: tsc, then node
// --test) against `countersign serve` with the demo configuration on a
// SQLite file of its own.
func TestClient(t *testing.T) {
	dir := nodetest.Need(t, ".", "this test runs the TypeScript client's node tests")
	url := servetest.Serve(t, servetest.Build(t), []string{"--store", servetest.SQLiteStore(t)})
	servetest.NPMTest(t, dir, 3*time.Minute, "COUNTERSIGN_URL="+url)
}
