// Package chaos runs the real countersign binary as a cluster — one serve
// process and three worker processes sharing a store, SQLite or PostgreSQL —
// under faults, and checks that approvals are never lost and that approved
// actions run at most once and end with the outcome their backend saw.
//
// The pieces, one file each (all in _test.go files; this package exports
// nothing):
//
//   - backend_test.go: the signed test backend of the webhook actions. It
//     verifies every request's signature (webhook.Verify), records every
//     execute in a SQLite ledger of its own (a unique key per operation id, a
//     second execute of an operation is recorded as a double execution),
//     answers reconcile from that ledger, and takes a random moment for each
//     execute so that faults land in the middle of some.
//   - cluster_test.go: the processes: `countersign serve` on a fixed port
//     (so that clients find it again after a restart) and `countersign
//     worker` ×3, each started, SIGKILLed, SIGSTOPped and resumed by the
//     test. On PostgreSQL the workers reach the database through a
//     tcpproxy, which can black-hole them (a partition); serve reaches it
//     directly.
//   - load_test.go: the clients. Through serve's HTTP API an agent makes
//     calls of the webhook actions and approvers decide them on the
//     decisions route: most are approved by one approver, some need two
//     (quorum 2, two different approvers), some are rejected. Most calls
//     are in independent mode (the workers execute them); about a quarter
//     are in wait mode: once approved, the client repeats the call and serve
//     executes it in that request, and the outcome the client is told must
//     be the one recorded. A
//     request that meets a fault (connection refused or reset, 503) is
//     retried as a client would; a 500 is recorded and fails the test.
//   - faults_test.go: the fault injector. Every 1–2 s it picks one fault:
//     SIGKILL serve or a worker and start it again, SIGSTOP a worker or serve
//     past the lease and SIGCONT it, on PostgreSQL black-hole the workers'
//     proxy for a few seconds, and, in the standalone phase only, restart
//     PostgreSQL.
//   - chaos_test.go: the scenarios and the checks. When the load is done
//     every fault is healed and the cluster drains; then, against the store
//     and the backend's ledger: 0 double executions of non-idempotent
//     actions; every outcome agrees with the backend (succeeded ⇔ executed,
//     same receipt; failed, rejected ⇒ never executed); every approval a
//     client got a 2xx "applied" for is recorded on its proposal and the
//     proposal is not pending or rejected; 0 proposals left approved,
//     executing or reconciling.
//
// Sizes: a small run per store (400 calls over 35 s, under a minute each) is
// part of `make test`; -short makes 100 calls over 12 s; CS_CHAOS_FULL=1
// (`make chaos`) makes 3,334, 3,001 of them approved, over 4 minutes. The
// PostgreSQL restart restarts the shared server, so it runs only with
// CS_CHAOS_PG_RESTART=1, alone (`make test-pg-restart`, after every other
// package). docs/reliability.md ("Chaos suite") has the figures.
package chaos
