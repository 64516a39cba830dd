// Package aguitest runs the unmodified AG-UI client, @ag-ui/client's
// HttpAgent at the version package-lock.json pins, against POST /v1/agui
// of a real `countersign serve` (docs/agui.md), on SQLite and on
// PostgreSQL: an action call that ends a run with an interrupt, its resume
// approved, rejected or cancelled; a text decision run; a proposal decided
// over the HTTP API before the resume, which then carries the decision
// that stands; an expired interrupt; resumes the server refuses (not
// allowed to decide, not the thread's owner, a bad payload, an interrupt
// of another thread). Every event the client receives is checked against
// @ag-ui/core's EventSchemas, and the client's own stream verification is
// on, so a stream breaking AG-UI's rules fails the node test, RUN_ERROR
// streams included.
//
// The Go test builds cmd/countersign once and, for each store, serves it
// with a configuration of refund actions (the thread's owner approves a
// refund, a quick refund expires in two seconds, finance approves a big
// refund), runs npm test with the server's URL in COUNTERSIGN_URL and that
// store's test backend's in COUNTERSIGN_BACKEND_URL, and checks how often
// the backend executed each customer's refund. The PostgreSQL subtest gets
// a schema of its own (internal/pgtest); without a reachable server it
// skips, except in CI, where it fails.
//
// The npm packages are installed with npm ci (the Makefile's clients-deps
// does it; the test does it too when node_modules does not hold what
// package.json pins). Without node or npm the test skips, except in CI (CI
// set), where it fails.
package aguitest
