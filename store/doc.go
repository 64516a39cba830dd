// Package store defines the contract between the Countersign engine and its
// storage drivers, the records they keep (proposals, decisions, leases,
// outcomes, grants, threads, messages and audit events) and the state
// machine's transition rules, which every driver shares.
//
// A driver is a thin layer: it loads a proposal under a lock (a mutex, SQLite's
// single writer, or PostgreSQL's row lock), applies one of the Apply functions
// in transition.go, and writes the row back guarded by its version, together
// with the Change's side effects, in one transaction. The conformance suite in
// store/storetest runs the same tests, races included, against every driver.
//
// The records carry no JSON encoding of their own: the HTTP API renders its
// own wire types from them (server/), and a driver that keeps a record in a
// JSON column encodes it through a private storage type, so that neither
// form changes when the other does.
//
// Drivers: store/memstore (tests, one process), store/sqlitestore (the
// embedded default) and store/pgstore (many processes, many machines).
package store
