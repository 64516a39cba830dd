package email

import (
	"bytes"
	"encoding/json"
	"fmt"
	htmltemplate "html/template"
	texttemplate "text/template"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/plaintext"
)

// mailTemplates are a message's two parts.
type mailTemplates struct {
	text *texttemplate.Template
	html *htmltemplate.Template
}

func parseMails() (*mailTemplates, error) {
	t, err := texttemplate.ParseFS(assets, "templates/mail.txt")
	if err != nil {
		return nil, fmt.Errorf("parse mail.txt: %w", err)
	}
	h, err := htmltemplate.ParseFS(assets, "templates/mail.html")
	if err != nil {
		return nil, fmt.Errorf("parse mail.html: %w", err)
	}
	return &mailTemplates{text: t, html: h}, nil
}

// mailData is what a message says. Every text an agent or an actor chose
// is plain text already (internal/plaintext): control and invisible
// characters show as \u{…} escapes of their hex code point, so nothing in it can break a header, a
// line or the reader's view of it.
type mailData struct {
	Actor      string
	Title      string
	Action     string
	Requester  string
	Input      string
	Preview    string
	Expires    string
	Escalated  bool
	Quorum     int
	ApproveURL string
	RejectURL  string
	// StepUp: an approval needs a passkey; the approve link's page says
	// so and sends the approver to InboxURL.
	StepUp   bool
	InboxURL string
}

// title is what a proposal is called for people: its confirmation's title,
// else its action.
func title(p *cstype.Proposal) string {
	if p.Confirmation.Title != "" {
		return p.Confirmation.Title
	}
	return p.Action
}

// prettyInput is the input as indented JSON, or as it came when it is not
// JSON.
func prettyInput(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// when writes a time for a message, in UTC: the reader's zone is unknown.
func when(t time.Time) string { return t.UTC().Format("Mon, 2 Jan 2006 15:04 MST") }

// message builds one approver's message.
func (c *Channel) message(p *cstype.Proposal, id countersign.Identity, event cstype.EventType, issued *countersign.IssuedEmailLinks) (*gomail.Msg, error) {
	data := mailData{
		Actor:     plaintext.Line(id.Actor),
		Title:     plaintext.Line(title(p)),
		Action:    plaintext.Line(p.Action),
		Requester: plaintext.Line(p.Requester),
		Input:     plaintext.Multiline(prettyInput(p.Input)),
		Preview:   plaintext.Multiline(p.Preview),
		Expires:   when(issued.ExpiresAt),
		Escalated: event == cstype.EventEscalated,
		Quorum:    p.Quorum,
		StepUp:    p.StepUp != "",
		InboxURL:  c.inboxURL(p.ID),
	}
	if t, ok := issued.Tokens[countersign.Approve]; ok {
		data.ApproveURL = c.linkURL(t)
	}
	if t, ok := issued.Tokens[countersign.Reject]; ok {
		data.RejectURL = c.linkURL(t)
	}
	var text, html bytes.Buffer
	if err := c.mails.text.Execute(&text, data); err != nil {
		return nil, fmt.Errorf("render text part: %w", err)
	}
	if err := c.mails.html.Execute(&html, data); err != nil {
		return nil, fmt.Errorf("render html part: %w", err)
	}
	m := gomail.NewMsg()
	if err := m.From(c.o.From); err != nil {
		return nil, fmt.Errorf("from: %w", err)
	}
	if err := m.To(c.o.Addresses[id.Actor].Email); err != nil {
		return nil, fmt.Errorf("to: %w", err)
	}
	subject := "Approval needed: " + data.Title
	if data.Escalated {
		subject = "Escalated, approval needed: " + data.Title
	}
	m.Subject(subject)
	m.SetMessageID()
	m.SetDate()
	// Mark the message as sent by a machine (RFC 3834), so that
	// auto-responders do not answer it.
	m.SetGenHeader("Auto-Submitted", "auto-generated")
	m.SetBodyString(gomail.TypeTextPlain, text.String())
	m.AddAlternativeString(gomail.TypeTextHTML, html.String())
	return m, nil
}
