// Package web is the approver's inbox: server-rendered HTML pages, served by
// `countersign serve` at /, where a person signs in with an API key or a JWT,
// sees the proposals they may decide or own, and approves, rejects or (as an
// operator) resolves them. Decisions are recorded with via "web". The grants
// page (/grants) lists the remembered approvals the engine lets the actor
// manage (those it asked for, those it granted, and for operators the
// tenant's), each with its scope, action, input digest, origin proposal and
// whether it is live, and revokes them.
//
// [Inbox.Handler] serves the inbox's own paths only (any other is its 404
// page); the process mounts it at / beside the HTTP API ([server.Server]),
// whose event stream the inbox relays to signed-in browsers.
//
// # What the approver reads
//
// The list shows first what waits for the reader: pending proposals the
// reader may approve and has not decided yet. Then the pending ones that
// wait for others (the reader voted already, or is not an approver: the
// requester, an operator), then the rest, each in the list's order (newest
// first, one page at a time). The nav badge and the title count only what
// waits for the reader, up to 100 ("100+" beyond). Which proposal waits for
// whom is the engine's answer ([countersign.Engine.Turn],
// [countersign.Engine.WaitingFor]), never the inbox's.
//
// A proposal's page reads top to bottom: its title; what will happen (its
// status, what approving does and until when, what runs as whom); who asked,
// in which thread; the conversation that led to the call; the input; and the
// reader's part in the decision. The conversation is the thread's messages
// up to and including the agent's message that made the call (for a call
// made through the API, up to the proposal's creation, and an entry of the
// page's own stands for the call), the last 20 of them with a count of those
// left out; whoever may see the proposal may read it, nothing written after
// the call and nothing of another thread is in it, and a result of another
// call the reader may not see is withheld
// ([countersign.Engine.ProposalConversation]). The input's top-level fields
// are a definition list; a string with line breaks shows as text that keeps
// them (white-space: pre-wrap in the style sheet), nested objects and arrays
// as nested lists, and the exact JSON is folded beneath. The decision part
// offers Approve and Reject only while the proposal waits for the reader's
// decision; once the reader decided, it says how, when and why, and how
// many approvals are still needed from whom; to a reader who does not
// decide, who does. Identifiers and internals (proposal, tool call,
// operation and run ids, state version, input digest, the lease, the audit
// trail with its sealing status and hashes) are folded under "Technical
// details", which a refresh keeps open or closed.
//
// Every text an agent or an actor chose (titles, messages, input values,
// reasons) is shown as plain text: html/template escapes the markup and
// internal/plaintext shows invisible and control characters as \u{XXXX}.
//
// # Sessions
//
// Signing in exchanges the pasted token for a session: a random 32-byte
// token in a cookie (HttpOnly, SameSite=Strict, Secure as
// [Options.SecureCookies] says: auto marks it Secure when the request came
// over TLS or from one of [Options.TrustedProxies] saying https). Sessions
// are kept by the engine in the store, so they survive a restart and hold in
// every process on the store; the store keeps only the SHA-256 of the cookie
// token and of the pasted credential. A session lasts [Options.SessionTTL],
// or until the JWT it was opened with expires, whichever is sooner; one
// opened with an API key is checked on every request against the
// configured keys, and ends when its key is removed or stands for someone
// else. Signing out ends it everywhere.
//
// Sign-in attempts are limited per client address (a token bucket,
// [Options.SignInBurst] at once and one more each [Options.SignInInterval]);
// over the limit the answer is 429, code TOO_MANY_REQUESTS, with
// Retry-After. Behind a trusted proxy the client is the last
// X-Forwarded-For hop that is not a trusted proxy.
//
// After signing in the browser goes back where it was going, but only to a
// path of this site: a next that a browser would read as another site, as
// given or decoded, sends it home.
//
// # Cross-site requests
//
// Every request that changes state (sign in, sign out, decide, resolve,
// revoke a grant) is a
// POST carrying a per-session token in a hidden field, compared in constant
// time; signing in uses a per-form token in a cookie instead. Origin and
// Sec-Fetch-Site, where the browser sends them, must name this origin.
//
// # Pages and live updates
//
// Every page is rendered by html/template (so everything is escaped) and
// sent with a strict Content-Security-Policy: no inline script or style,
// nothing from other origins. The one script, embedded with the stylesheet
// by go:embed, follows the API's event stream ([server.Server.StreamEvents],
// authorised by the session) and, on a change, fetches the page again and
// swaps its live regions, so the list, the count of what waits for the
// reader and a proposal's status move without a reload. Without JavaScript
// every page still works; it just does not move by itself.
package web
