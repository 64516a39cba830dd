package email

import (
	"context"
	"errors"
	"fmt"
	"slices"

	gomail "github.com/wneessen/go-mail"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/notifications"
)

// Notifications is the channel as the notification outbox sees it: named
// Name, handed Events, delivering by mail.
func (c *Channel) Notifications() notifications.Channel {
	return notifications.Channel{
		Name: Name, Events: slices.Clone(Events), MaxAttempts: c.o.MaxAttempts, Backoff: c.o.Backoff,
		Deliver: c.deliver,
	}
}

// deliver makes one attempt at one notification: it mails each approver
// the proposal may be announced to by email, who was not mailed about
// this notification yet. Any approver's failure fails the attempt, and the
// outbox tries again later; those already mailed are not mailed again.
func (c *Channel) deliver(ctx context.Context, d notifications.Delivery) error {
	p := d.Proposal
	if p == nil || p.Tenant != c.o.Tenant || !slices.Contains(p.Notify, Name) || p.Status != cstype.StatusPending {
		// Another tenant's, not announced by email, or decided since:
		// nothing to send, and nothing to try again.
		return nil
	}
	to := c.o.Engine.Announcees(ctx, p, Name, c.ids)
	if len(to) == 0 {
		return nil
	}
	client, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = client.Close() }()
	var errs []error
	for _, id := range to {
		if err := c.mailOne(ctx, client, d, p, id); err != nil {
			errs = append(errs, fmt.Errorf("mail %s: %w", id.Actor, err))
		}
	}
	return errors.Join(errs...)
}

// mailOne mints one approver's links and mails them.
func (c *Channel) mailOne(ctx context.Context, client *gomail.Client, d notifications.Delivery, p *cstype.Proposal, id countersign.Identity) error {
	issued, err := c.o.Engine.IssueEmailLinks(ctx, &countersign.EmailLinkIssue{
		Tenant: p.Tenant, ProposalID: p.ID, Approver: id, NotificationID: d.ID, TTL: c.o.LinkTTL,
	})
	switch {
	case errors.Is(err, countersign.ErrConflict), errors.Is(err, countersign.ErrForbidden):
		// Decided, or no longer the approver's to decide, since the
		// proposal was read: there is nothing to mail them.
		return nil
	case err != nil:
		return err
	case issued.AlreadySent:
		return nil
	}
	msg, err := c.message(p, id, d.Event, issued)
	if err != nil {
		return err
	}
	if err := client.Send(msg); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	tokens := make([]string, 0, len(issued.Tokens))
	for _, t := range issued.Tokens {
		tokens = append(tokens, t)
	}
	// The message is out. Were this record lost, a retry would mail the
	// approver again, with new links, and retire these.
	return c.o.Engine.MarkEmailLinksSent(ctx, p.Tenant, tokens...)
}

// dial connects to the SMTP server as Options.SMTP says.
func (c *Channel) dial(ctx context.Context) (*gomail.Client, error) {
	s := c.o.SMTP
	opts := []gomail.Option{gomail.WithPort(s.Port), gomail.WithTimeout(s.Timeout)}
	switch s.TLS {
	case TLSNone:
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	case TLSStartTLS:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	case TLSImplicit:
		opts = append(opts, gomail.WithSSL())
	}
	if s.TLSConfig != nil {
		tc := s.TLSConfig.Clone()
		if tc.ServerName == "" {
			tc.ServerName = s.Host // the certificate is checked against the host dialled
		}
		opts = append(opts, gomail.WithTLSConfig(tc))
	}
	if s.Username != "" {
		// PLAIN refuses to send the password in the clear unless the
		// server is on loopback.
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthPlain), gomail.WithUsername(s.Username), gomail.WithPassword(s.Password))
	}
	client, err := gomail.NewClient(s.Host, opts...)
	if err != nil {
		return nil, fmt.Errorf("smtp client: %w", err)
	}
	if err := client.DialWithContext(ctx); err != nil {
		return nil, fmt.Errorf("connect to %s:%d: %w", s.Host, s.Port, err)
	}
	return client, nil
}
