// Package mcptest puts the reference MCP servers from npm,
// @modelcontextprotocol/server-memory and @modelcontextprotocol/server-filesystem,
// behind the MCP gateway of a real `countersign serve` (docs/mcp.md), and
// drives it with the MCP TypeScript SDK's client and the MCP inspector's
// CLI, at the versions package-lock.json pins: the re-exported tools, an
// approval by elicitation (the entity or the file exists, made once), a
// rejection (the graph and the file unchanged), a client without
// elicitation whose call holds, ends pending, is approved over the API and
// runs once when called again, another tenant who sees and decides nothing,
// a read that a glob allows running at once, tools the servers annotate
// readOnlyHint held as writes unless the file lists them (with a schema pin
// that matches, when pinned), and `countersign mcp` serving the same tools
// over stdio as a desktop client starts it.
//
// The Go test builds cmd/countersign and, for each store (SQLite, and a
// PostgreSQL schema of its own), serves it with the two servers as stdio
// upstreams (node, from this folder's node_modules), runs npm test with the
// server's URL in COUNTERSIGN_URL, the filesystem server's folder in
// COUNTERSIGN_FS_DIR and the binary and its configuration in COUNTERSIGN_BIN
// and COUNTERSIGN_CONFIG, and checks the memory server's file afterwards.
//
// The npm packages are installed with npm ci (the Makefile's clients-deps
// does it; the test does it too when node_modules does not hold what
// package.json pins). Without node or npm the test skips, except in CI, where
// it fails; so does the PostgreSQL subtest without a reachable server.
package mcptest
