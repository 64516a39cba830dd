// Package email is the email approver channel: it mails each approver of a
// proposal a message with one link per decision, and serves the page a link
// opens (GET /d/{token}) and the form on it that decides (POST /d/{token}).
//
// # Messages
//
// [Channel.Notifications] is a notifications.Channel named "email" that the
// notification outbox hands proposal.created and proposal.escalated. For a
// proposal of the channel's tenant whose rule notifies "email" and that is
// still pending, it asks the engine whom the proposal may be announced to by
// email ([countersign.Engine.Announcees]) among the actors the channel maps
// to an address: never the requester, never an agent, only who may decide it
// now. For each, the engine mints the links
// ([countersign.Engine.IssueEmailLinks]): 256 random bits each, stored as
// their SHA-256 only, bound to the tenant, the proposal, the approver and
// the verdict, expiring at the earlier of Options.LinkTTL and the proposal's
// expiry. The message (text and HTML) gives the title, the requester, the
// input, the expiry and the links, under Options.PublicURL.
//
// A failed delivery (the SMTP server refused or could not be reached) is
// retried by the outbox with its backoff. A token's plaintext is never
// stored, so a retry cannot mail the same links again: it mints new ones and
// the engine retires the earlier attempt's unsent links, while an approver
// whose message was accepted already is not mailed twice
// (docs/decisions/0041-email-approvals.md).
//
// # Pages
//
// [Channel.Handler] serves GET and POST /d/{token}. A GET only shows a
// confirmation page (what will happen, who asked, the input, and one button),
// so that a mail scanner that opens links decides nothing. The button's form
// POSTs back with a CSRF value that the GET set as a cookie scoped to that
// link's path (a double submit): a POST without it, or with another value,
// decides nothing. The POST decides through
// [countersign.Engine.DecideByEmailLink] as {tenant, actor, kind: human,
// roles} from the channel's mapping, with via "email"; using one of an
// approver's links spends all of that approver's links for the proposal. A
// used, retired, expired or foreign (unknown, malformed, another tenant's)
// link gets a page that says why, and nothing is decided. A proposal whose
// rule needs a passkey step-up cannot be approved by email: the page says so
// and links to the proposal in the inbox.
//
// Every page is rendered with html/template, agent-supplied text shown as
// plain text (internal/plaintext), and sent with Cache-Control: no-store,
// Referrer-Policy: no-referrer and the inbox's Content-Security-Policy. No
// answer is ever a 500 carrying internal text.
package email
