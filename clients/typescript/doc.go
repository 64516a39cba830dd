// Package typescript holds @countersign/client, the TypeScript client of
// Countersign's HTTP API (an npm package: package.json, src/, test/), and
// the Go test that runs its node tests against a real server: it builds
// cmd/countersign, serves the demo on a temporary SQLite file and runs
// npm test with the server's URL in COUNTERSIGN_URL. TestLangGraph runs
// @countersign/langgraph's (langgraph/, its own package.json) the same way,
// against testdata/caller.yaml's caller-executed actions, and
// TestOpenAIAgents @countersign/openai-agents'. TestInstallFromTarball
// packs each package (npm pack), installs the tarballs --offline into a new
// project and imports them, as users install them from the repository.
//
// The npm packages are pinned by package-lock.json and installed with npm
// ci (the Makefile does it; the test does it too when node_modules does
// not hold what package.json pins). Without node or npm the test skips,
// except in CI (CI set), where it fails.
package typescript
