// Package sqlitestore is the SQLite driver of the store contract, and
// Countersign's embedded default: one file on one machine, no server. It uses
// modernc.org/sqlite, a pure-Go SQLite, so it needs no cgo.
//
//	s, err := sqlitestore.Open(ctx, "countersign.db", nil)
//
// # One writer
//
// A Store holds two connection pools on the file. Every write runs on the
// writer: one connection (database/sql's pool capped at one), which the
// writer holds for the Store's life, its statements prepared on it once
// (writer.go); every transaction begun IMMEDIATE, so it holds SQLite's write
// lock from its first statement. Concurrent writes share a transaction
// (group commit, group.go). A transition applies the shared rule from
// store/transition.go to the row and writes it back guarded by the version
// it started from (UPDATE … WHERE id = ? AND version = ?), with its events,
// outcome message and grants, in that one transaction: a compare-and-set.
//
// The row a transition starts from is the one this Store last read or wrote,
// when it remembers it (internal/rowmemory: the engine reads a proposal before
// it decides it, a worker holds the rows it claimed when it renews and
// settles them), taken before the writer's turn; else the writer reads it
// under the lock. So the one writer, which every write of the process waits
// for, neither reads nor decodes the row. A remembered row is only a guess:
// one that another process changed since fails the version guard, having
// written nothing, and the writer reads the row and applies the rule anew;
// an answer that writes nothing (unchanged, a conflict, a lost lease) is
// always judged on a row read under the lock (decision 0049).
//
// Reads run on a separate pool of query_only connections. The file is in
// WAL mode, so readers see the last committed state and never wait for the
// writer, nor it for them. A statement reads one snapshot: a read that must
// see several rows of one state asks in one statement where it can (a
// call's lookup reads the thread, the tool call's record id and the grant
// together, lookup.go) and opens a read transaction only when a second
// statement must follow (a repeated tool call's proposal).
//
// Commits are durable when they return: synchronous=FULL. (WAL with NORMAL
// keeps the file consistent but may lose the last commits on power loss; a
// lost decision or settlement is not acceptable here.)
//
// # Several processes
//
// Several processes (or several Stores in one process) may open the same
// file: a CLI next to a server, or a few workers. Their writers take turns
// at SQLite's lock: a BEGIN IMMEDIATE that finds the lock held waits up to
// Options.BusyTimeout, then fails with SQLITE_BUSY. Because the lock is taken
// before anything is read, two writers never hold a read snapshot each and
// deadlock upgrading it. Nothing else is shared: leases and the version
// guard coordinate workers, as on PostgreSQL. Event ids are assigned under
// the lock, in commit order, so ListEvents is a gap-free stream across
// processes. The file must live on a local disk: SQLite's locks do not work
// reliably over network file systems, and WAL needs shared memory.
//
// # The audit chain
//
// Events are insert-only, and chained after they commit by the holder of
// the file's sealing lease (audit.go). The seal reads the events above
// where sealing stands (audit_sealed) in id order, which on SQLite is commit
// order, and chains them on the read pool; then one write renews the lease,
// fenced by its token, moves audit_sealed and appends one block per tenant
// to audit_blocks: the tenant's events of the batch, their ids as a JSON
// array and their hashes side by side (migration 0013). A block is appended
// only where its tenant's chain ends, and (tenant, last_seq) is unique, so
// no two events can share a seq. The writer, which every write of the
// process shares, is held only for that: a few inserts a seal, not one an
// event. The view audit_chain shows the chain one row an event.
//
// # Migrations
//
// The schema is a sequence of embedded SQL files, migrations/NNNN_name.sql,
// forward-only: an applied file is never edited, a change is a new file. The
// applied versions are recorded in schema_migrations; each migration runs in
// its own write transaction and re-checks the version under the lock, so
// processes may migrate concurrently. Open migrates unless
// Options.SkipMigrations is set; Migrate and SchemaVersion serve the
// countersign migrate command. A database whose version is newer than this
// build knows is refused.
//
// The first migration also stores a random 32-byte key in the meta table.
// It signs ListProposals cursors, so a cursor survives a restart, works in
// every process sharing the file, and is rejected by any other database.
//
// # Schema
//
// Everything a query filters, orders or guards on is a scalar column;
// decisions, approvers, outcomes and the like are JSON text read back whole.
// Times are INTEGER Unix nanoseconds in UTC, so times outside the years
// 1677–2262 cannot be stored (ErrInvalidParams). Partial indexes match the
// worker's claim query and the expiry sweep, whose WHERE clauses repeat the
// index terms verbatim so that SQLite can use them.
package sqlitestore
