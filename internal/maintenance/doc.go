// Package maintenance holds Countersign's periodic jobs, one service per
// job, and their one start point.
//
// A service takes the store, or the narrow interface of it that its job
// needs, and callbacks: Changed to wake waiters and observers, a signing
// key, a Send function, a metrics setter. None takes *countersign.Engine,
// so the jobs neither reach into the engine nor depend on its package, and
// each is tested alone on real stores.
//
// Every service is built on one loop: it runs its job at once, then every
// interval less a random tenth of it (processes started together drift
// apart), backs off while the store cannot be reached (Outage: logged once,
// pauses doubling to OutageBackoffMax, the return logged once), and logs any
// other failure. Trigger is its test hook: it runs the job now and reports
// when the run is over, so tests assert a run's effect without sleeping.
//
// countersign.Worker is the start point: Worker.Run runs, through Run,
// every service its options ask for, beside its executions and for as long
// as they run. `countersign serve` and `countersign worker` start them only
// through it, and so does a program that embeds the library (New, NewWorker,
// Run), which therefore delivers notifications too.
//
// # Where the periodic work lives
//
// Every loop of the code base, and where it went (or why it stayed):
//
//	job                     was                                              now
//	expiry                  Engine.RunSweeper's round (engine.go)            Expiry (expiry.go)
//	escalation              Engine.RunSweeper's round (engine.go)            Escalation (escalation.go)
//	reminders               Engine.RunSweeper's round (engine.go)            Reminders (reminders.go)
//	session cleanup         Engine.RunSweeper's round (engine.go)            SessionCleanup (sessions.go)
//	audit sealer            Engine.RunSealer (audit.go), checkpoint.go       Sealer (sealer.go, checkpoints.go)
//	notification delivery   notifications.Deliverer.Run, started by serve    NotificationDelivery (notifications.go),
//	                        and worker in cmd/countersign                    run by the Worker (WorkerOptions.Notifications)
//	proposal counts         server.ProposalCounts.Run (server/               ProposalCounts (proposal_counts.go), run by the
//	                        proposalcounts.go), started by serve             Worker (WorkerOptions.OnProposalCounts)
//	outage backoff          outage.go (root): the loops' pacing while the    Outage (outage.go), used by every service, the
//	                        store is down                                    worker's claims and the waiters' watcher
//	planner statistics      (new: autovacuum alone, up to a minute late)     Statistics (statistics.go), run by the Worker on a
//	                                                                         store.Statistics store (PostgreSQL)
//
// The jobs take no identity, so none is a method of countersign.Engine
// (ADR 0032): Worker.SweepOnce runs one batch of each sweeping service, for
// tests and for programs that schedule work themselves, and
// Engine.StartSession removes a batch of expired sessions at each sign-in:
// a request's work, not a loop.
//
// These loops stay where they are: they do a request's or an execution's
// own work, not periodic maintenance.
//
//   - The worker's claim loop (worker.go): the executions themselves.
//   - An execution's lease renewal (exec_lease.go), retry pauses (exec_uncertain.go) and
//     a waiting call's timer (call_wait.go): they live and die with one call.
//   - The waiters' watcher (call_watch.go): runs only while calls wait.
//   - Event streams' polls and keep-alives and their credential and session
//     rechecks (server/events.go, server/runstream.go,
//     server/credentialguard.go, web/session.go): one per open stream.
//   - The agent runtime's claims of runs (agent/runtime.go): agent runs are
//     work, like executions; serve and worker start it beside the Worker.
//   - The MCP gateway's upstream reconnection (mcpgateway/) and PostgreSQL's
//     LISTEN reconnection (store/pgstore/notify.go): connections, not jobs.
//   - The start-up wait for the store (cmd/countersign/storewait.go): it
//     ends when the store answers; the chat command's idle timer
//     (cmd/countersign/chat.go).
package maintenance
