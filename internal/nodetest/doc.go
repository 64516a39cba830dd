// Package nodetest is what the Go tests that drive Node.js need: node and
// npm on PATH (a test skips without them, except in CI, where that is a
// failure), a folder's npm packages at the versions its package.json pins
// (npm ci from the committed lockfile when node_modules is stale), and an
// environment in which the node tools touch no network (no telemetry, no
// update checks). test/clients, test/agui, test/mcp and clients/typescript
// use it. BuildCountersign, Serve and RunTests build and serve the real
// binary and run a folder's node tests against it (test/mcp uses them).
package nodetest
