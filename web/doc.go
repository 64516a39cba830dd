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
// swaps its live regions, so the list, the title's pending count and a
// proposal's status move without a reload. Without JavaScript every page
// still works; it just does not move by itself.
package web
