// Package cstype holds Countersign's records: the proposals, grants,
// threads, messages, runs, events and outbox entries the engine (package
// countersign) reads and returns, their statuses and the errors that name
// what happened to them.
//
// It is apart from package store, the driver contract, so that a surface
// (server, web, mcpgateway, agent, …) can name a record without importing
// what stores it: the root's public API is typed in the root and here,
// never in store (docs/decisions/0031-records-package.md). Package store
// keeps aliases of every name here for its drivers.
//
// cstype imports nothing of the module but internal helpers.
package cstype
