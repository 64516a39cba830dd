// Package mcptest runs the official TypeScript MCP SDK's client against
// countersign's MCP gateway (docs/mcp.md), in front of the reference
// filesystem MCP server, @modelcontextprotocol/server-filesystem, both at
// the versions package-lock.json pins: the filesystem's tools listed as
// fs__ actions (the denied one hidden, no outputSchema); a read a glob
// allows runs at once; a write approved in the client's elicitation runs,
// one declined never does; without elicitation a write is held, answered
// pending, approved over the HTTP API and run by the repeated call; and
// `countersign mcp` serves the same tools over stdio.
//
// The Go test builds cmd/countersign, serves it on SQLite with the
// filesystem server as the upstream "fs" over a folder of its own, waits
// for /readyz (which is 503 while an upstream is down), runs npm test
// (node --test) against it and checks the files the node tests left.
//
// The npm packages are installed with npm ci (the Makefile's clients-deps
// does it; the test does it too when node_modules does not hold what
// package.json pins). Without node or npm the test skips, except in CI (CI
// set), where it fails.
package mcptest
