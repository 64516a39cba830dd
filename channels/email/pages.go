package email

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"mime"
	"net/http"
	"strconv"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/plaintext"
)

//go:embed templates
var assets embed.FS

// contentSecurityPolicy is the inbox's: nothing inline, nothing from
// another origin, forms only to this one.
const contentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; " +
	"frame-ancestors 'none'; base-uri 'none'"

// csrfCookie holds the value a link's form must carry back: set by the
// GET, scoped to the link's path, so it is bound to that link.
const csrfCookie = "countersign_email_csrf"

// csrfBytes is the CSRF value's randomness.
const csrfBytes = 32

// maxForm bounds a POST's body: the form has one field.
const maxForm = 8 << 10

func parsePages() (*template.Template, error) {
	t, err := template.ParseFS(assets, "templates/page.html")
	if err != nil {
		return nil, fmt.Errorf("parse page.html: %w", err)
	}
	return t, nil
}

// page is what one page shows. Every string in it is plain text already.
type page struct {
	status   int
	Heading  string
	Result   string
	Problem  string
	Note     string
	InboxURL string
	P        *proposalView
	Form     *form
	CSS      string
}

// proposalView is a proposal as the confirmation page shows it.
type proposalView struct {
	Title, Action, Requester, Preview, Input string
	Status                                   cstype.Status
	Expires                                  string
	Needed                                   string
}

// form is the confirmation's form.
type form struct {
	Action  string
	CSRF    string
	Actor   string
	Verdict countersign.Verdict
	Button  string
}

// Handler serves GET and POST /d/{token}, and a page saying the link is
// not valid for any other path under /d/. Mount it at /d/ only when the
// channel is configured: without it, /d/ answers 404.
func (c *Channel) Handler() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /d/{token}", c.handleGet)
	m.HandleFunc("POST /d/{token}", c.handlePost)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// A link's page is the link's holder's alone: never cached, and
		// never sending the link on as a Referer.
		h.Set("Cache-Control", "no-store")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		if _, pattern := m.Handler(r); pattern == "" {
			// Any other path under /d/, or another method: no link.
			c.render(w, foreign())
			return
		}
		m.ServeHTTP(w, r)
	})
}

// handleGet shows the confirmation page, and decides nothing.
func (c *Channel) handleGet(w http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	pg, id, link, p := c.look(r.Context(), token)
	if pg != nil {
		c.render(w, pg)
		return
	}
	csrf, err := newCSRF()
	if err != nil {
		c.o.Logger.Error("email: csrf value", "err", err)
		c.render(w, unavailable())
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: csrfCookie, Value: csrf, Path: c.linkPath(token), MaxAge: 3600,
		HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteStrictMode,
	})
	button := "Approve"
	if link.Verdict == countersign.Reject {
		button = "Reject"
	}
	c.render(w, &page{
		status: http.StatusOK, Heading: button + " this request?",
		Note: "Nothing is decided until you press " + button + " below.",
		P:    c.view(r.Context(), id, p),
		Form: &form{Action: c.linkPath(token), CSRF: csrf, Actor: plaintext.Line(id.Actor), Verdict: link.Verdict, Button: button},
	})
}

// handlePost decides, when the form carries the CSRF value its page set.
func (c *Channel) handlePost(w http.ResponseWriter, r *http.Request) {
	token := r.PathValue("token")
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
		c.render(w, &page{status: http.StatusUnsupportedMediaType, Heading: "Nothing was decided",
			Problem: "This is not the link page's form. Open the link from your email again."})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		pg := &page{status: http.StatusBadRequest, Heading: "Nothing was decided",
			Problem: "The form could not be read. Open the link from your email again."}
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			pg.status = http.StatusRequestEntityTooLarge
		}
		c.render(w, pg)
		return
	}
	pg, id, link, _ := c.look(r.Context(), token)
	if pg != nil {
		c.render(w, pg)
		return
	}
	cookie, err := r.Cookie(csrfCookie)
	sent := r.PostForm.Get("csrf")
	if err != nil || !validCSRF(cookie.Value) || subtle.ConstantTimeCompare([]byte(cookie.Value), []byte(sent)) != 1 {
		c.render(w, &page{status: http.StatusForbidden, Heading: "Nothing was decided",
			Problem: "This form did not come from the link's page, or that page expired. Open the link from your email again and press the button there."})
		return
	}
	// The value served its one form.
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: "", Path: c.linkPath(token), MaxAge: -1,
		HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteStrictMode})
	res, err := c.o.Engine.DecideByEmailLink(r.Context(), token, id)
	if err != nil {
		c.render(w, c.refusal(r.Context(), err, link))
		return
	}
	c.render(w, c.decided(r.Context(), id, link, res))
}

// look reads what a link's page needs, or returns the page that says why
// it cannot be used: a foreign link, an approver the channel no longer
// maps, a link that is not live, a proposal the approver may no longer
// see, decided already, or whose approval needs a passkey.
func (c *Channel) look(ctx context.Context, token string) (*page, countersign.Identity, *countersign.EmailLink, *cstype.Proposal) {
	var none countersign.Identity
	link, err := c.o.Engine.EmailLink(ctx, c.o.Tenant, token)
	switch {
	case errors.Is(err, countersign.ErrNotFound):
		return foreign(), none, nil, nil
	case err != nil:
		c.o.Logger.Error("email: read link", "err", err)
		return unavailable(), none, nil, nil
	}
	id, ok := c.mapped(link.Actor)
	if !ok {
		return &page{status: http.StatusForbidden, Heading: "This link no longer works",
			Problem: "It was sent to an approver this server no longer mails. Nothing was decided."}, none, nil, nil
	}
	if link.State != countersign.EmailLinkLive {
		return c.notLive(link), none, nil, nil
	}
	p, err := c.o.Engine.Proposal(ctx, id, link.ProposalID)
	switch {
	case errors.Is(err, countersign.ErrForbidden), errors.Is(err, countersign.ErrNotFound):
		return &page{status: http.StatusForbidden, Heading: "This link no longer works",
			Problem: "You may no longer see or decide this request. Nothing was decided."}, none, nil, nil
	case err != nil:
		c.o.Logger.Error("email: read proposal", "err", err)
		return unavailable(), none, nil, nil
	}
	if p.Status != cstype.StatusPending || !c.o.Now().Before(p.ExpiresAt) {
		if pg := c.spentSince(ctx, token); pg != nil {
			return pg, none, nil, nil
		}
		return &page{status: http.StatusConflict, Heading: "Nothing left to decide",
			Problem: "This request is " + c.statusWords(p) + ". Nothing was decided.",
			P:       c.view(ctx, id, p), InboxURL: c.inboxURL(p.ID)}, none, nil, nil
	}
	if link.Verdict == countersign.Approve && p.StepUp != "" {
		return &page{status: http.StatusForbidden, Heading: "Approving needs your passkey",
			Problem: "This request's rule asks each approver to confirm with a passkey, which a link cannot carry. Approve it in the inbox, where your passkey is asked for. Nothing was decided here.",
			P:       c.view(ctx, id, p), InboxURL: c.inboxURL(p.ID)}, none, nil, nil
	}
	turn := c.o.Engine.Turn(ctx, id, p, Name)
	if (link.Verdict == countersign.Approve && !turn.Yours) || (link.Verdict == countersign.Reject && !turn.Reject) {
		if pg := c.spentSince(ctx, token); pg != nil {
			return pg, none, nil, nil
		}
		pg := &page{status: http.StatusConflict, Heading: "Nothing left for you to decide",
			Problem: "You may not " + verb(link.Verdict) + " this request now. Nothing was decided.",
			P:       c.view(ctx, id, p), InboxURL: c.inboxURL(p.ID)}
		if d := turn.Decision; d != nil {
			pg.Problem = "You " + string(d.Decision) + " this request via " + plaintext.Line(d.Via) + " at " + when(d.At) + ". Nothing more was decided."
		}
		return pg, none, nil, nil
	}
	return nil, id, link, p
}

// spentSince is the page for a link that a press of this message's
// other link spent after look first read it, or nil while it is still
// live. The engine spends a link before it records the link's decision,
// so a proposal that already shows that decision finds the link spent on
// this second read, and the approver is told their other press won
// rather than that nothing is left to decide.
func (c *Channel) spentSince(ctx context.Context, token string) *page {
	link, err := c.o.Engine.EmailLink(ctx, c.o.Tenant, token)
	if err != nil || link.State == countersign.EmailLinkLive {
		return nil
	}
	return c.notLive(link)
}

// decided is the page after a decision the engine answered.
func (c *Channel) decided(ctx context.Context, id countersign.Identity, link *countersign.EmailLink, res *countersign.EmailDecision) *page {
	p := res.Result.Proposal
	pg := &page{status: http.StatusOK, P: c.view(ctx, id, p), InboxURL: c.inboxURL(p.ID)}
	switch res.Result.Status {
	case countersign.DecideApplied:
		pg.Heading = "You " + string(link.Verdict) + " this request"
		pg.Result = "Your decision was recorded. The request is now " + c.statusWords(p) + "."
	case countersign.DecideUnchanged:
		pg.Heading = "Already decided"
		pg.Result = "You had " + string(link.Verdict) + " this request already; nothing changed."
	case countersign.DecideExpired:
		pg.status, pg.Heading = http.StatusConflict, "Nothing was decided"
		pg.Problem = "This request expired before your decision."
	default:
		pg.status, pg.Heading = http.StatusConflict, "Nothing was decided"
		pg.Problem = "This request is " + c.statusWords(p) + " already; your decision was not recorded."
	}
	return pg
}

// refusal is the page for a decision the engine refused.
func (c *Channel) refusal(ctx context.Context, err error, link *countersign.EmailLink) *page {
	var nl *countersign.EmailLinkNotLiveError
	var fe *countersign.ForbiddenError
	switch {
	case errors.As(err, &nl):
		return c.notLive(nl.Link)
	case errors.Is(err, countersign.ErrNotFound):
		return foreign()
	case errors.As(err, &fe):
		// The engine's reasons name the rule, never anything internal.
		return &page{status: http.StatusForbidden, Heading: "Nothing was decided",
			Problem:  "You may not " + verb(link.Verdict) + " this request: " + plaintext.Line(fe.Reason) + ".",
			InboxURL: c.inboxURL(link.ProposalID)}
	case errors.Is(err, countersign.ErrForbidden), errors.Is(err, countersign.ErrAgentCannotDecide):
		return &page{status: http.StatusForbidden, Heading: "Nothing was decided",
			Problem: "You may not " + verb(link.Verdict) + " this request.", InboxURL: c.inboxURL(link.ProposalID)}
	}
	c.o.Logger.Error("email: decide", "proposal", link.ProposalID, "err", err)
	return unavailable()
}

// notLive is the page for a link that can no longer decide.
func (c *Channel) notLive(l *countersign.EmailLink) *page {
	pg := &page{status: http.StatusGone, Heading: "This link was used", InboxURL: c.inboxURL(l.ProposalID)}
	switch l.State {
	case countersign.EmailLinkSpent:
		if l.SpentHere {
			pg.Problem = "You already used this link: you " + string(l.SpentVerdict) + " this request at " + when(l.SpentAt) + ". Nothing more was decided."
		} else {
			pg.Problem = "You already used another link of this message, to " + verb(l.SpentVerdict) + " this request at " + when(l.SpentAt) +
				". A message's links work once, together. Nothing more was decided."
		}
	case countersign.EmailLinkRetired:
		pg.Heading = "This link was replaced"
		pg.Problem = "A newer email about this request replaced this link. Use the links in the newer message. Nothing was decided."
	default:
		pg.Heading = "This link expired"
		pg.Problem = "This link expired at " + when(l.ExpiresAt) + ". Nothing was decided."
	}
	return pg
}

// foreign is the page for a link this server does not know for the
// channel's tenant: unknown, malformed, or another tenant's, alike.
func foreign() *page {
	return &page{status: http.StatusNotFound, Heading: "This link is not valid",
		Problem: "It may have been cut off or mistyped, or it is not a link of this server. Nothing was decided."}
}

func unavailable() *page {
	return &page{status: http.StatusServiceUnavailable, Heading: "Try again in a moment",
		Problem: "Countersign could not read or record this just now. Nothing is known to have been decided; open the link again in a moment."}
}

// view is a proposal as a page shows it, with what it still needs.
func (c *Channel) view(ctx context.Context, id countersign.Identity, p *cstype.Proposal) *proposalView {
	v := &proposalView{
		Title: plaintext.Line(title(p)), Action: plaintext.Line(p.Action), Requester: plaintext.Line(p.Requester),
		Preview: plaintext.Multiline(p.Preview), Input: plaintext.Multiline(prettyInput(p.Input)), Status: p.Status,
	}
	if p.Status == cstype.StatusPending {
		v.Expires = when(p.ExpiresAt)
		if n := c.o.Engine.Turn(ctx, id, p, Name).Needed; n > 0 {
			v.Needed = "It needs " + strconv.Itoa(n) + " more approval" + map[bool]string{true: "", false: "s"}[n == 1] + "."
		}
	}
	return v
}

// render writes a page; a template that fails is a plain 500 without
// detail, which the page's fixed data should never cause.
func (c *Channel) render(w http.ResponseWriter, pg *page) {
	pg.CSS = c.base.Path + "/static/app.css"
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(pg.status)
	if err := c.pages.Execute(w, pg); err != nil {
		c.o.Logger.Error("email: render page", "err", err)
	}
}

func newCSRF() (string, error) {
	b := make([]byte, csrfBytes)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func validCSRF(s string) bool {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	return err == nil && len(b) == csrfBytes
}

func verb(v countersign.Verdict) string {
	if v == countersign.Approve {
		return "approve"
	}
	return "reject"
}

// statusWords says where a proposal stands, for a sentence.
func (c *Channel) statusWords(p *cstype.Proposal) string {
	switch {
	case p.Status == cstype.StatusPending && !c.o.Now().Before(p.ExpiresAt):
		return "past its deadline (" + when(p.ExpiresAt) + ")"
	case p.Status == cstype.StatusPending:
		return "still pending"
	case p.Status == cstype.StatusExpired && p.Outcome != nil && p.Outcome.Reason == cstype.ReasonNotCollected:
		return "expired: approved, but the agent did not call again before " + when(p.ExpiresAt)
	}
	s := string(p.Status)
	if d := lastDecision(p); d != nil && (p.Status == cstype.StatusApproved || p.Status == cstype.StatusRejected) {
		s += " (by " + plaintext.Line(d.Actor) + " via " + plaintext.Line(d.Via) + ")"
	}
	return s
}

// lastDecision is the proposal's latest decision, nil when it has none.
func lastDecision(p *cstype.Proposal) *cstype.Decision {
	if len(p.Decisions) == 0 {
		return nil
	}
	return &p.Decisions[len(p.Decisions)-1]
}
