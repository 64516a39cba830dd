// Package mcptest puts the reference MCP servers from npm,
// @modelcontextprotocol/server-memory and @modelcontextprotocol/server-filesystem,
// behind the MCP gateway of a real `countersign serve` (docs/mcp.md), and
// drives it with unmodified clients at the versions package-lock.json pins.
//
// gateway.test.mjs drives it with the MCP TypeScript SDK v1 client
// (@modelcontextprotocol/sdk, 2025 revisions) and the MCP inspector's CLI:
// the re-exported tools, an approval by elicitation (the entity or the file
// exists, made once), a rejection (the graph and the file unchanged), a
// client without elicitation whose call holds, ends pending, is approved
// over the API and runs once when called again, another tenant who sees
// and decides nothing, a read that a glob allows running at once, tools the
// servers annotate readOnlyHint held as writes unless the file lists them
// (with a schema pin that matches, when pinned), `countersign mcp` serving
// the same tools over stdio as a desktop client starts it, with approvals
// by elicitation and over the API there too, and a forged requestState
// deciding nothing over either transport.
//
// client-v2.test.mjs drives it with the TypeScript SDK v2 client
// (@modelcontextprotocol/client) in its legacy (2025) mode and its
// 2026-07-28 mode, over HTTP and over stdio, each through the same cases: a
// read at once; a call held, approved over the API and collected once (on
// 2026-07-28 by a new client instance, the credential's thread continuing
// the proposal); rejected; expired; approved, declined and dismissed
// in-band (2026-07-28: input_required answered by the SDK's own driver;
// 2025: elicitation requests); forged, tampered, foreign and spent request
// states deciding nothing. tasks-v2.test.mjs drives MCP Tasks with the v2
// client and @modelcontextprotocol/ext-tasks: a task made for a gated call,
// polled to completed with the upstream's result, rejected, expired and
// cancelled; tasks/get refused (-32021) to a client that does not declare
// the extension; no task where none is served (a 2025 session, stdio); and
// a task polled to completion across a restart of a server of its own.
//
// The Go test builds cmd/countersign and, for each store (SQLite, and a
// PostgreSQL schema of its own), serves it with the two servers as stdio
// upstreams (node, from this folder's node_modules, each behind
// upstream-tap.mjs, which logs every tools/call it passes on), with the
// secret of the 2026-07-28 request states in the environment
// (mcp.state_secret_env). It runs npm test with the server's URL in
// COUNTERSIGN_URL, the filesystem server's folder in COUNTERSIGN_FS_DIR, the
// binary and its configuration in COUNTERSIGN_BIN and COUNTERSIGN_CONFIG,
// and the configuration of the server the Tasks test restarts (another
// store, another memory file) in COUNTERSIGN_RESTART_CONFIG. Then it counts
// the calls the upstreams received: each approved entity and file made by
// exactly one call, nothing else ever called.
//
// The npm packages are installed with npm ci (the Makefile's clients-deps
// does it; the test does it too when node_modules does not hold what
// package.json pins). Without node or npm the test skips, except in CI, where
// it fails; so does the PostgreSQL subtest without a reachable server.
package mcptest
