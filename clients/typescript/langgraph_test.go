package typescript

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/nodetest"
	"github.com/countersign/countersign/internal/servetest"
)

// TestLangGraph runs @countersign/langgraph's node tests (npm test in
// langgraph/: the client's and the package's tsc, then node --test)
// against `countersign serve` with testdata/caller.yaml on a SQLite file of
// its own. It lives beside TestClient, not in a package of its own, so that
// the two never build the client's dist/ at once (tests of one package run
// one after the other).
func TestLangGraph(t *testing.T) {
	what := "this test runs @countersign/langgraph's node tests"
	nodetest.Need(t, ".", what) // the client langgraph/ depends on (file:..)
	dir := nodetest.Need(t, "langgraph", what)
	config, err := filepath.Abs("testdata/caller.yaml")
	if err != nil {
		t.Fatal(err)
	}
	url := servetest.Serve(t, servetest.Build(t), []string{"--config", config, "--store", servetest.SQLiteStore(t)})
	servetest.NPMTest(t, dir, 4*time.Minute, "COUNTERSIGN_CALLER_URL="+url)
}
