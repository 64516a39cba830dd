// Package aguitest runs the unmodified AG-UI client, @ag-ui/client's
// HttpAgent at the version package-lock.json pins, against POST /v1/agui
// of a real `countersign serve` (docs/agui.md): an action call that ends a
// run with an interrupt, its resume approved, rejected or cancelled, and a
// text decision run. Every event the client receives is checked against
// @ag-ui/core's EventSchemas, and the client's own stream verification is
// on, so a stream breaking AG-UI's rules fails the node test.
//
// The Go test builds cmd/countersign, serves it with a configuration whose
// refunds the thread's owner approves, runs npm test with the server's URL
// in COUNTERSIGN_URL and the test backend's in COUNTERSIGN_BACKEND_URL,
// and checks how often the backend executed each refund.
//
// The npm packages are installed with npm ci (the Makefile's clients-deps
// does it; the test does it too when node_modules does not hold what
// package.json pins). Without node or npm the test skips, except in CI (CI
// set), where it fails.
package aguitest
