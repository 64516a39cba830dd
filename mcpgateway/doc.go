// Package mcpgateway re-exports the tools of upstream MCP servers, each call
// gated by Countersign's policy.
//
// A Gateway connects to its upstream servers (a command over stdio, or a
// streamable HTTP endpoint), and turns each upstream tool into a raw action
// of the engine named <server>__<tool>: the tool's inputSchema validates the
// input, and its version is the tool's name and a hash of that schema and
// its annotations (ToolVersion), so a changed tool is a new version. What an
// upstream says of its tools is its claim: a tool is a read action only when
// the upstream's configuration lists it in ReadOnly (its schema matching
// the pin, when pinned) or trusts the upstream's annotations and the tool is
// annotated readOnlyHint; every other tool is a write, which the policy
// gates. Tools the policy denies are not listed. An upstream's
// tools/list_changed notification refreshes its actions; an upstream that
// changes a tool without one is caught before the call runs: the Execute
// hook lists the tools afresh and fails a call whose tool's version changed
// (ACTION_VERSION_CHANGED), without calling the upstream. Headers
// configured for an HTTP upstream are sent to its origin alone.
//
// The gateway serves those tools over MCP itself: over streamable HTTP
// (Handler, with bearer authentication, the server's API keys and JWTs) and
// over any other transport for one identity (Serve, used by `countersign
// mcp` over stdio and by tests over in-memory transports).
//
// The engine is the only authority: the gateway translates MCP into engine
// calls and renders the answers. A tools/call is one Engine.Call in the
// caller's thread (on MCP 2026-07-28 the credential's, mcp:<fingerprint>,
// or a _meta thread of its own; before, the session's, mcp_<session id>;
// thread.go), whose Execute
// hook calls the upstream tool, so the claim and the lease make it run at
// most once per proposal. A repeated identical call (same tool, same input)
// while its proposal is pending or approved continues it rather than
// proposing again. Approval comes through the client's elicitation when the
// client supports it and the caller may decide under a rule whose channels
// include mcp (recorded via "mcp"); otherwise the call is held up to Hold
// for a decision from any channel, then answered as pending. Only the
// answer to a question the gateway asked, about that proposal, of that
// credential, decides; any other input response is ignored. On 2026-07-28
// the question goes out as an input_required result with a signed,
// single-use request state (state.go).
//
// Where Options.Tasks is set, a 2026-07-28 client that declares the Tasks
// extension gets a task instead of a held call: the proposal, made in
// independent mode, which the workers execute and tasks/get reads (task.go).
//
// An upstream connection that breaks while a call runs leaves the outcome
// uncertain: unknown, unless the tool is idempotent (listed in Idempotent,
// or annotated idempotentHint on an upstream whose annotations are
// trusted), in which case the engine calls it again with the same operation id (passed to the
// upstream in _meta as countersign.dev/operation_id) once the upstream is
// back. A stdio upstream that dies is restarted with backoff; Down names the
// upstreams that are not connected, for /readyz.
package mcpgateway
