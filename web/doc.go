// Package web is the approver's inbox: server-rendered HTML pages, served by
// `countersign serve` at /, where a person signs in with an API key or a JWT,
// sees the proposals they may decide or own, and approves, rejects or (as an
// operator) resolves them. Decisions are recorded with via "web".
//
// The inbox wraps the HTTP API ([server.Server]): [Inbox.Handler] serves the
// inbox's pages and hands every other path to the API, so one listener
// serves both.
//
// # Sessions
//
// Signing in exchanges the pasted token for a session: a random 32-byte id in
// a cookie (HttpOnly, SameSite=Strict, Secure under TLS or when
// [Options.SecureCookies] is set). Sessions live in this process's memory
// only, with an absolute lifetime ([Options.SessionTTL]); a restart signs
// everyone out, and several serve processes behind one address need sticky
// sessions. The token itself is never stored; the identity it resolved to
// at sign-in holds for the session's life, so revoking a key ends access
// through the inbox only when its sessions expire.
//
// # Cross-site requests
//
// Every request that changes state (sign in, sign out, decide, resolve) is a
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
