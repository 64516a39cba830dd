// Package notifications delivers the notification outbox: the rows the store
// writes, in the transaction of each event, for every configured receiver
// whose event types name the event's type (see the outbox of the store contract, package store).
//
// A Deliverer is run by countersign's Worker (WorkerOptions.Notifications),
// the start point of every periodic job; its claims and records are
// internal/maintenance's NotificationDelivery, and this package says what a
// receiver gets. It writes its targets to the store as it starts, claims due
// notifications under a lease, posts each to its receiver as JSON {"id",
// "type", "proposal", "at"} with the headers Idempotency-Key (the
// notification's id, the same on every attempt) and Countersign-Signature
// (webhook.Sign with the receiver's secret, over the raw body), and records
// the attempt under the lease: a 2xx answer is delivered; anything else —
// another status, a time-out, a refused connection — is tried again after a
// backoff that doubles from Backoff.Initial up to Backoff.Max, until
// MaxAttempts attempts were made, then the notification is failed and waits
// for an operator's retry.
//
// A redirect is never followed, whatever Options.Client: a 3xx answer is a
// failed attempt, so the signed request never reaches a host the receiver's
// answer names. The text of a failed attempt, stored as the notification's
// last error and logged, never holds a URL's userinfo, query values or
// fragment: a receiver's URL may carry a token there.
//
// Delivery is at least once. A worker that dies mid-delivery leaves its
// lease to run out; another worker claims the notification again as a new
// attempt, with the same id, so receivers deduplicate by Idempotency-Key.
// The body is rendered once, at the first attempt, and kept: every attempt
// sends the same bytes. "proposal" is the proposal as it stood at that first
// attempt, rendered by the server's wire type (Options.Render), not as it
// stood at the event: the outbox row is written by a trigger that knows
// nothing of the API's JSON.
//
// Nothing here runs on a decision's path. The event's transaction writes a
// row; delivery happens later, in the workers, each request bounded by its
// receiver's timeout. A slow or dead receiver delays only its own
// notifications.
//
// Several Deliverers, in one process or many, share a store safely: claims
// never hand one notification to two of them while its lease runs, and an
// attempt is recorded only with the lease's token.
package notifications
