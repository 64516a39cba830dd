package typescript

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/nodetest"
	"github.com/countersign/countersign/internal/servetest"
)

// TestOpenAIAgents runs @countersign/openai-agents' node tests (npm test in
// openai-agents/: the client's and the package's tsc, then node --test, whose
// resumes also run in child processes) against `countersign serve` with
// testdata/caller.yaml on a SQLite file of its own. It lives beside
// TestLangGraph for the same reason: the tests of one package run one after
// the other, so the two never build the client's dist/ at once.
func TestOpenAIAgents(t *testing.T) {
	what := "this test runs @countersign/openai-agents' node tests"
	nodetest.Need(t, ".", what) // the client openai-agents/ depends on (file:..)
	dir := nodetest.Need(t, "openai-agents", what)
	config, err := filepath.Abs("testdata/caller.yaml")
	if err != nil {
		t.Fatal(err)
	}
	url := servetest.Serve(t, servetest.Build(t), []string{"--config", config, "--store", servetest.SQLiteStore(t)})
	servetest.NPMTest(t, dir, 4*time.Minute, "COUNTERSIGN_CALLER_URL="+url)
}
