// Package mcppython drives the MCP gateway of a real `countersign serve`
// (docs/mcp.md), and `countersign mcp` over stdio, with the unmodified
// client of the MCP Python SDK (`mcp` 2.3.0 from PyPI, pinned with hashes
// in requirements.lock and installed into .venv-mcp-python by `make
// mcp-python-env`), in front of the reference servers
// @modelcontextprotocol/server-memory and @modelcontextprotocol/server-filesystem
// from test/mcp's node_modules (test/mcp's package-lock.json pins them).
//
// The pytest tests (test_gateway.py) run on protocol 2026-07-28 (the SDK's
// default, which discovers it) and on 2025-11-25 (the SDK's legacy mode,
// an initialize handshake), over streamable HTTP (/mcp) and stdio: a read
// run at once; a held write answered pending, approved over the HTTP API and
// collected once by a new client instance; a rejection and an expiry; an
// approval asked in-band (input_required on 2026-07-28,
// elicitation/create on 2025) and answered accept, decline and cancel; MCP
// Tasks through the SDK's extension API; forged, tampered and replayed
// request states that decide nothing.
//
// The Go test builds cmd/countersign, serves it for each store (SQLite, and
// a PostgreSQL schema of its own) with the two servers as stdio upstreams,
// each behind upstream_log.py, which records every tools/call that reaches
// the server, and runs pytest from .venv-mcp-python with the server's URL,
// the binary, its configuration, the state secret and the files to read in
// the environment. Afterwards it reads that record, the memory server's
// file and the filesystem server's folder: no operation is called twice,
// each approved write ran exactly once and no other write ran at all.
//
// It runs only under `make test-mcp-python` (CS_MCP_PYTHON=1), so that the
// plain go test ./... of make test-race does not run it a second time.
// Without .venv-mcp-python it skips, except in CI (CI set), where it fails;
// so it does without node or npm, and the PostgreSQL subtest without a
// reachable server.
package mcppython
