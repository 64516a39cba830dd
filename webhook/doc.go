// Package webhook builds actions whose prepare, execute and reconcile hooks
// live in the user's backend, called over HTTP as docs/api.md's "Webhook actions"
// specifies.
//
// Every request is a POST of a JSON body, signed with the Countersign-Signature
// header (see Sign; a backend checks it with Verify, or with any HMAC-SHA256
// library). The bodies carry the requester's tenant and actor: the action
// runs as the requester, whoever approved it. An execute also carries its
// operation id as the Idempotency-Key header; the backend must apply an
// operation id at most once, and refuse a change whose state_version is not
// the current one.
//
// # What an answer means
//
// The execute hook follows docs/decisions/0002: an error is an uncertain
// outcome (reconcile, an idempotent retry with the same operation id, or
// unknown) unless it wraps countersign.ErrNotApplied.
//
//	2xx with {"receipt", "result"}        succeeded
//	4xx                                   failed, not applied
//	3xx, 5xx, a time-out, a broken        uncertain (a redirect is never
//	connection, a 2xx body that is not    followed: the backend that
//	the JSON expected                     answered may have acted)
//	a failure before a connection         failed, not applied (nothing of
//	existed: name lookup, refused dial,   the request left this process)
//	TLS handshake, an ended context
//
// The line between the last two is drawn with net/http/httptrace: from the
// moment the transport holds a connection, request bytes may be on the wire.
// net/http is also never allowed to resend a request it wrote in full (it
// would, on a reused connection, for a POST with an Idempotency-Key): only
// the engine decides whether an execute is sent again.
//
// Prepare answers 200 {"preview", "state_version"}; 403 denies the call as
// countersign.DeniedByAuthorize and 409 or 422 as countersign.DeniedByPreflight,
// with the body's "reason". Reconcile answers 200 {"status": "applied",
// "receipt"}, {"status": "not_applied"} or {"status": "unknown"}; any other
// answer is an error, and the proposal stays reconciling.
//
// # Boundaries
//
// An action calls only the URLs it was built with: no URL is ever taken from
// an input or a response, and redirects are refused. URLs are checked when
// the action is built (absolute http or https, a host, no userinfo, no
// fragment). Response bodies are read up to MaxResponseBytes and must be
// JSON. Each request is bounded by its endpoint's Timeout. Error messages
// never repeat an endpoint's URL, which may carry a token, since they end up
// in outcomes an agent reads.
package webhook
