// Package server is Countersign's HTTP API, the contract in docs/api.md: calls,
// proposals and their decisions, threads, grants, a Server-Sent Events
// stream, health and readiness probes, Prometheus metrics and the OpenAPI 3.1
// document that describes all of it (served at /openapi.json).
//
// Build one with [New] and serve [Server.HTTPServer] (or mount
// [Server.Handler] behind your own http.Server):
//
//	metrics := server.NewMetrics(prometheus.DefaultRegisterer)
//	engine, err := countersign.New(countersign.Options{Store: st, Observer: metrics, …})
//	…
//	metrics.InitActions(engine.Actions()) // their series exist from the start, at 0
//	srv, err := server.New(server.Options{Engine: engine, Auth: authn, Metrics: metrics})
//	…
//	httpSrv := srv.HTTPServer(":8080")
//	err = httpSrv.ListenAndServe()
//
// # Identity
//
// Every /v1 route needs "Authorization: Bearer <token>". The token alone
// fixes the caller's tenant, actor and roles ([auth.Authenticator]); nothing
// in a body or a query chooses them. /healthz, /readyz and /openapi.json are
// open; /metrics is open unless [Options.MetricsRole] names the role it needs.
//
// # Visibility and ownership
//
// The server decides none of it: every read and every write goes through
// the engine ([countersign.Engine.Proposal], Thread, ThreadProposals,
// ProposalEvents, Grants, RevokeGrant, Feed, Call, Decide, …), which
// enforces who may see and do what, and the server maps its refusals to
// answers. A proposal is visible to the owner of its thread (the thread's
// first caller) and to the actors who may decide it (its approvers:
// "requester", "role:NAME", "actor:ID"). Another tenant's proposal, or one
// the caller may not see, answers 403; an unknown one 404. Thread ids are
// namespaced by tenant, so another tenant's thread is simply unknown (404).
// A thread and its messages are shown to its owner only, and only the owner
// makes calls in it: anyone else gets 403 FORBIDDEN, which says nothing of
// the thread (no proposal, confirmation id or result). Grants are shown to,
// and may be revoked by, their requester, the approver who granted them, and
// operators.
//
// # Decision channels
//
// Decisions over HTTP are recorded with via "api". The CLI says who it is
// with the request header
//
//	Countersign-Via: cli
//
// and no other value is accepted (anything else is 400 INVALID_BODY). "web"
// is deliberately not: any holder of a token could claim it and slip past a
// rule restricted to the inbox, so the inbox records "web" from its own
// signed-in session, never from a header.
//
// # Long polls and streams
//
// POST /v1/calls in wait mode and GET /v1/proposals/{id}?wait_seconds=N are
// bounded long-polls (at most 60 seconds): a client time-out never loses a
// decision, since repeating the call resumes it. A call keeps running when its
// client goes away, so an approval that arrives meanwhile is executed and its
// outcome recorded for the repeat. GET /v1/events streams proposal.created,
// proposal.decided, proposal.settled (also for cancellations and operator
// resolutions), proposal.expired and proposal.superseded, each with the
// proposal object as data and the store's audit event id as id, so a client
// resumes with Last-Event-ID. The stream wakes on the engine's change
// notifications, which include the engine's watcher: it reads each tenant
// that streams (or waiting calls) follow once per WaitPoll for all of them,
// so changes made by other processes arrive too, without a poll per stream
// (docs/worker.md, "Event streams share the watcher"). The stream reads the
// engine's feed
// ([countersign.Engine.Feed]), which sends each event once and only to those
// who may see its proposal; PostgreSQL may commit an event after one with a
// higher id, so such a late event can arrive after a higher id. A stream
// resuming from an old Last-Event-ID pages forward through the history once.
// Without Last-Event-ID a stream starts now; a Last-Event-ID that is
// malformed or ahead of the newest event answers 400 INVALID_CURSOR.
//
// One actor (tenant and actor) holds at most [Options.MaxStreamsPerActor]
// event streams at once in one process (default 8); one more answers 429
// TOO_MANY_REQUESTS with Retry-After, before anything is read.
//
// The http.Server from [Server.HTTPServer] bounds headers and bodies
// against slow clients, and leaves WriteTimeout unset so long-polls and
// streams live: each handler sets its own write deadline instead, and
// Shutdown ends open event streams.
package server
