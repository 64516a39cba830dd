// Package pgstore is the PostgreSQL driver of the store contract, for
// Countersign deployments with many processes on many machines. It uses
// github.com/jackc/pgx/v5 and a pgxpool.Pool.
//
//	s, err := pgstore.Open(ctx, "postgres://countersign@db/app", nil)
//
// Open makes a pool of its own from a DSN (pgxpool's pool_* settings apply)
// of Options.MaxConns connections, DefaultMaxConns by default, unless the
// DSN sets pool_max_conns, which wins; New uses a pool the caller owns and
// closes.
//
// # Transitions: one round trip, compare-and-set
//
// Every state change of a proposal that exists is one statement (cas.go):
// the shared rule from store/transition.go is applied in Go to the row as
// last read, and an UPDATE … WHERE id = $1 AND version = $2 writes only the
// columns the rule changed, with, in CTEs of the same statement, its audit
// events, its outcome message (admitted once: ON CONFLICT DO NOTHING, and
// only into a thread that still exists), the grant it stores and the grants
// it activates, each only if the row was written. So a transition is one
// round trip and its own transaction, and no lock is held while the network
// or the Go side works. A row that moved since it was read is not written:
// the store reads it again and applies the rule to what it finds, so the
// version guard makes every transition a compare-and-set across processes.
//
// The row a transition starts from is the one this Store last read or
// wrote, when it remembers it (internal/rowmemory: the engine reads a proposal
// before deciding it, a worker holds the row it claimed): then the
// transition costs one round trip, else two (read, write). A remembered row
// is only a guess — a stale one costs a failed write and a read — and an
// answer that writes nothing (unchanged, a conflict, a lost lease) is always
// judged on a row read from the database. Statements aborted as deadlock
// victims are rerun.
//
// Concurrent single-row transitions of one Store share statements
// (casgroup.go): while a few statements run, new writes queue and go
// together as one statement, each row guarded by its own version, so a
// group pays one commit — under load, the WAL flush is what a transition
// waits for. A write that finds a statement free runs at once. Concurrent
// GetProposal calls share statements the same way (readgroup.go).
//
// The pool Open makes (PoolConfig) runs its connections with
// plan_cache_mode = force_generic_plan unless the DSN sets one: the store's
// statements are prepared once per connection and planned once, since their
// plans depend on their shape, not their values (TestQueryPlans checks the
// generic plans); PostgreSQL's default kept re-planning the compare-and-set
// statements, which cost a third of a decision's server CPU.
//
// Creation (create.go) is one pipelined batch, which PostgreSQL runs as one
// implicit transaction, each statement with a snapshot of its own. It is
// idempotent on (tenant, thread, tool call id): the INSERT … ON CONFLICT DO
// NOTHING of concurrent creators of one tool call waits for the first, and
// the others return its proposal. The batch first inserts the thread if it
// is new (ON CONFLICT DO NOTHING waits for a concurrent first call, so the
// first to commit owns the thread), and reads the grant that stands in for
// an approval FOR SHARE, so that a revocation waits for the creation or the
// creation sees the revocation; the proposal is inserted only if the thread
// is the requester's and the grant approves it. Replacement is serialised
// per (tenant, requester, thread, action, replacement key) by a
// transaction-scoped advisory lock taken after the insert, and the
// statement after it, which sees every creation committed before the lock
// was granted, supersedes the older pending proposals, so concurrent
// replacements leave exactly one pending proposal.
//
// Where SQL restates a rule (the claim, the supersession, the grant check of
// a creation), a test pins it to the Go function: TestConformance's
// claim tests, TestSupersedeInSQL, TestGrantApprovesInSQL; and
// TestRulesChangeOnlyMutableColumns pins that no rule changes a column the
// compare-and-set write does not send.
//
// # Claims: FOR UPDATE SKIP LOCKED
//
// A worker's ClaimBatch is one statement: it picks the claimable rows in
// claim order (ORDER BY updated_at, id) with FOR UPDATE SKIP LOCKED, leases
// them and records the claim events. Concurrent
// workers, in any number of processes, skip each other's rows instead of
// waiting, and each row is claimed once. The claim order lives in a table
// of its own, claim_queue (migration 0022, claimqueue.go): a row per
// proposal of the claimable statuses, written by the same statement as the
// proposal, so that no index of proposals names a column that a claim, a
// renewal or a settlement changes, and those updates are HOT. The inbox's,
// the replacement's and the deadlines' indexes live likewise on
// open_proposals (migration 0023, openproposals.go), a row per pending or
// waiting proposal, so that a decision's update is HOT too. The worker's
// settlements (SettleMany) and the expiry sweep (ExpireDue, bounded
// batches) write their whole group in one compare-and-set statement, its
// rows locked in id order so that two groups never wait for each other in
// a cycle.
//
// # Two clocks
//
// Deadlines are the application's: a proposal's ExpiresAt, a
// reconciliation's NextAttemptAt and a grant's expiry are computed by the
// engine and judged by Options.Now, the same clock, which also stamps
// records (created_at, decisions, outcomes, events).
//
// Leases are the database's: a claim, a renewal or a retry sets
// lease_expires_at to the database's statement_timestamp() plus the lease
// duration, and ClaimBatch judges an executing or reconciling row's lease
// expired by comparing it, in SQL, with the database's clock. A lease is
// what keeps two processes from executing one proposal, and processes on
// different machines disagree about the time; the database is the one clock
// they all share. A process whose clock runs ahead therefore cannot steal a
// lease that is still running. The Lease.ExpiresAt a call returns is the
// database's.
//
// Times are stored as timestamptz, with microsecond precision, and read
// back in UTC; the store truncates the times it is given to microseconds.
//
// # Notifications
//
// Store implements store.Notifier with LISTEN/NOTIFY on the channel
// countersign_<schema>. Writers announce, once their transactions commit:
//
//   - p:<proposal id> for every status change, so that a waiter in any
//     process re-reads the proposal;
//   - w when a proposal becomes approved in independent mode (a decision,
//     or a creation approved by a grant), so that workers claim it.
//
// The NOTIFYs are not sent inside the transaction that made the change:
// PostgreSQL takes a database-wide lock when a notifying transaction
// commits and holds it until the commit is flushed, so notifying
// transactions could only commit one at a time, defeating the server's
// group commit. Instead one goroutine per Store sends what committed
// transactions announced, deduplicated, in a transaction of its own that
// writes nothing else and does not wait for its flush (synchronous_commit
// off), one per round trip however many changes gathered meanwhile. A
// notification therefore always follows its change's commit, and a process
// that dies in between loses it: notifications are hints, and workers and
// waiters also poll. The one exception is the work notification, which
// wakes an idle worker and so sits on the approval → execution path: when
// the rate limiter allows one, it is sent inside the approving transaction,
// delivered at its commit. Work notifications are rate-limited per Store:
// at most one per Options.NotifyInterval; one that falls inside the window
// is not dropped, a single trailing one announces every approval committed
// meanwhile. Listen holds one connection of its own (application_name
// cs_listen_<schema>), outside the pool, and reconnects with backoff after
// a failure.
//
// # Schema and migrations
//
// Every table lives in one schema, Options.Schema (default "countersign"),
// and every statement names it, so the store works on any pool whatever its
// search_path, and several independent stores (tenants of a platform, tests)
// may share a database in different schemas.
//
// The schema is a sequence of embedded SQL files, migrations/NNNN_name.sql,
// forward-only: an applied file is never edited, a change is a new file.
// Migrate creates the schema if needed and applies each missing migration
// in its own transaction, under a transaction-scoped advisory lock keyed by
// the schema, recording it in schema_migrations; processes may migrate
// concurrently. Open and New migrate unless Options.SkipMigrations is set; a
// schema newer than the build is refused. The first migration stores a
// random 32-byte key in the meta table, which signs ListProposals cursors:
// they survive restarts, work in every process on the schema, and are
// rejected by any other schema.
//
// # Many processes
//
// Point every process at the same database and schema: API servers, CLIs,
// and any number of workers. They coordinate only through the database:
// version guards for transitions, SKIP LOCKED and fenced leases
// for execution, advisory locks for migrations and replacement, and
// LISTEN/NOTIFY for prompt wake-ups. No process is special. Size each
// process's pool for the concurrency it admits, not for its cores: a
// request or an execution that waits for a connection waits behind the
// others however idle the database is. Open's default, DefaultMaxConns
// (16), serves a server with the worker beside it; pgxpool's own default,
// the larger of 4 and the number of CPUs, which New's caller gets unless it
// sets MaxConns, is too small for one. Past a few connections per core of
// the database, more only queue inside it: a database with more cores may
// take a larger pool. Mind the database's max_connections across every
// process, and that each Listen holds one more connection, made with the
// pool's settings. Behind a connection pooler in
// transaction mode (PgBouncer), the pool needs the pooler's support for
// prepared statements or pgx's default_query_exec_mode=exec, and Listen,
// which needs a session of its own, does not work: connect such processes
// directly.
//
// # The audit chain
//
// Events are insert-only, and chained after they commit by the holder of
// the schema's sealing lease (audit.go): one transaction renews the lease,
// fenced by its token and locking its row, reads the events above where
// sealing stands (audit_sealed) in id order with their tenants' heads, and
// appends them to audit_chain, whose key (tenant, seq) refuses a fork. The
// sealer stops at an id it cannot see yet (a transaction still open), so an
// event that commits after higher ids is chained in its place; it passes a
// hole only once no transaction that could fill it is still running.
//
// Event ids come from a sequence: they grow in the order events are
// inserted, which across concurrent transactions is not quite the order in
// which they commit. A reader that follows ListEvents with AfterID may
// therefore, rarely, pass over an event whose transaction committed just
// after it read; a reader that must see every event should re-read a short
// window behind its position.
package pgstore
