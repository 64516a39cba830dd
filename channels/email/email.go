package email

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/mail"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/notifications"
)

// Name is the channel's name: in a rule's channels and notify, in a
// decision's via, and as the outbox's target.
const Name = countersign.ViaEmail

// The defaults of Options and SMTP.
const (
	// DefaultLinkTTL bounds a link's life; the proposal's expiry bounds it
	// too.
	DefaultLinkTTL = 72 * time.Hour
	// DefaultSMTPTimeout bounds the connection to the SMTP server, and
	// each command on it.
	DefaultSMTPTimeout = 30 * time.Second
	// DefaultSMTPPort is the submission port.
	DefaultSMTPPort = 587
)

// Events are the events that mail the approvers: a new proposal, and one
// whose escalation added approvers.
var Events = []cstype.EventType{cstype.EventCreated, cstype.EventEscalated}

// TLSMode says how the connection to the SMTP server is secured.
type TLSMode string

// The TLS modes.
const (
	// TLSNone sends in the clear. Credentials are then sent to a
	// loopback server only.
	TLSNone TLSMode = "none"
	// TLSStartTLS requires STARTTLS: a server that does not offer it, or
	// whose certificate does not verify, gets nothing.
	TLSStartTLS TLSMode = "starttls"
	// TLSImplicit connects over TLS from the first byte (SMTPS, port 465).
	TLSImplicit TLSMode = "tls"
)

// SMTP is the server that sends the messages.
type SMTP struct {
	Host string
	// Port defaults to DefaultSMTPPort.
	Port int
	// Username and Password authenticate with AUTH PLAIN when Username is
	// set; PLAIN is never sent in the clear except to a loopback server.
	Username, Password string
	// TLS defaults to TLSStartTLS.
	TLS TLSMode
	// TLSConfig verifies the server (nil: the system's roots and Host).
	TLSConfig *tls.Config
	// Timeout defaults to DefaultSMTPTimeout.
	Timeout time.Duration
}

// Address is where one actor is mailed, and the roles a link of theirs
// decides with.
type Address struct {
	Email string
	Roles []string
}

// Options configures a Channel. Zero fields take the documented defaults.
type Options struct {
	// Engine mints the links, reads and decides. Required.
	Engine *countersign.Engine
	// PublicURL is the base of every link (config public_url): an http or
	// https URL without query or fragment. Required.
	PublicURL string
	// Tenant is the one tenant the channel serves. Required.
	Tenant string
	// From is the messages' sender address. Required.
	From string
	// Addresses maps actors to their address and roles; two actors may not
	// share an address. Required.
	Addresses map[string]Address
	SMTP      SMTP
	// LinkTTL defaults to DefaultLinkTTL.
	LinkTTL time.Duration
	// MaxAttempts and Backoff are the outbox's, for the channel's
	// notifications (defaults: the notifications package's).
	MaxAttempts int
	Backoff     notifications.Backoff
	// Logger receives what a person must look into. Default
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock the pages word deadlines by (the engine's should be
	// the same). Default time.Now.
	Now func() time.Time
}

// Channel mails approvers and serves their links' pages.
type Channel struct {
	o      Options
	base   *url.URL
	secure bool // the links are https: the CSRF cookie is Secure
	ids    []countersign.Identity
	pages  *template.Template
	mails  *mailTemplates
}

// New validates the options and returns a Channel.
func New(o Options) (*Channel, error) {
	if o.Engine == nil {
		return nil, errors.New("email: Options.Engine is nil")
	}
	if o.Tenant == "" {
		return nil, errors.New("email: Options.Tenant is empty")
	}
	base, err := url.Parse(o.PublicURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" ||
		base.User != nil || base.RawQuery != "" || base.Fragment != "" {
		return nil, fmt.Errorf("email: Options.PublicURL %q: want an http or https URL without userinfo, query or fragment", o.PublicURL)
	}
	base.Path = strings.TrimSuffix(base.Path, "/")
	base.RawPath = ""
	if _, err := mail.ParseAddress(o.From); err != nil {
		return nil, fmt.Errorf("email: Options.From %q: %w", o.From, err)
	}
	if len(o.Addresses) == 0 {
		return nil, errors.New("email: Options.Addresses is empty")
	}
	seen := map[string]string{}
	actors := make([]string, 0, len(o.Addresses))
	for actor, a := range o.Addresses {
		addr, err := mail.ParseAddress(a.Email)
		if actor == "" || err != nil {
			return nil, fmt.Errorf("email: Options.Addresses[%q]: want an actor and an address (%q)", actor, a.Email)
		}
		key := strings.ToLower(addr.Address)
		if other, dup := seen[key]; dup {
			return nil, fmt.Errorf("email: Options.Addresses: %s and %s share the address %s", min(actor, other), max(actor, other), addr.Address)
		}
		seen[key] = actor
		actors = append(actors, actor)
	}
	slices.Sort(actors)
	c := &Channel{o: o, base: base, secure: base.Scheme == "https"}
	for _, actor := range actors {
		c.ids = append(c.ids, c.identity(actor))
	}
	s := &c.o.SMTP
	s.Port = cmp.Or(s.Port, DefaultSMTPPort)
	s.TLS = cmp.Or(s.TLS, TLSStartTLS)
	s.Timeout = cmp.Or(s.Timeout, DefaultSMTPTimeout)
	switch {
	case s.Host == "":
		return nil, errors.New("email: Options.SMTP.Host is empty")
	case s.Port < 1 || s.Port > 65535:
		return nil, fmt.Errorf("email: Options.SMTP.Port %d: want 1..65535", s.Port)
	case s.TLS != TLSNone && s.TLS != TLSStartTLS && s.TLS != TLSImplicit:
		return nil, fmt.Errorf("email: Options.SMTP.TLS %q: want none, starttls or tls", s.TLS)
	case s.Timeout < 0:
		return nil, errors.New("email: Options.SMTP.Timeout is negative")
	case s.Password != "" && s.Username == "":
		return nil, errors.New("email: Options.SMTP.Password without a Username")
	}
	c.o.LinkTTL = cmp.Or(c.o.LinkTTL, DefaultLinkTTL)
	if c.o.LinkTTL < 0 {
		return nil, errors.New("email: Options.LinkTTL is negative")
	}
	if c.o.Now == nil {
		c.o.Now = time.Now
	}
	if c.o.Logger == nil {
		c.o.Logger = slog.Default()
	}
	if c.pages, err = parsePages(); err != nil {
		return nil, fmt.Errorf("email: %w", err)
	}
	if c.mails, err = parseMails(); err != nil {
		return nil, fmt.Errorf("email: %w", err)
	}
	return c, nil
}

// identity is how a link of actor decides: a human of the channel's
// tenant with the roles the channel maps them to.
func (c *Channel) identity(actor string) countersign.Identity {
	return countersign.Identity{
		Tenant: c.o.Tenant, Actor: actor, Kind: countersign.KindHuman,
		Roles: slices.Clone(c.o.Addresses[actor].Roles),
	}
}

// mapped returns the identity of a mapped actor.
func (c *Channel) mapped(actor string) (countersign.Identity, bool) {
	if _, ok := c.o.Addresses[actor]; !ok {
		return countersign.Identity{}, false
	}
	return c.identity(actor), true
}

// linkURL is the link of a token, under PublicURL.
func (c *Channel) linkURL(token string) string {
	u := *c.base
	u.Path += "/d/" + token
	return u.String()
}

// linkPath is the path of a token's link, as the browser sees it: the
// CSRF cookie is scoped to it.
func (c *Channel) linkPath(token string) string { return c.base.Path + "/d/" + token }

// inboxURL is the proposal's page in the inbox, under PublicURL.
func (c *Channel) inboxURL(proposalID string) string {
	u := *c.base
	u.Path += "/proposals/" + url.PathEscape(proposalID)
	return u.String()
}
