// Package emailtest is for tests only: a real SMTP server in the test
// process (github.com/emersion/go-smtp) that keeps every message it takes,
// and the parsing of a message as a mail client reads it, down to its
// decision links. The channel's own tests and the cross-channel tests
// (cmd/countersign) use it; no production code imports it.
package emailtest

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/mail"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// ---------------------------------------------------------------------------
// A real SMTP server in the test process (github.com/emersion/go-smtp): it
// takes every message into a mailbox, can refuse the next messages, and can
// ask for AUTH PLAIN.

// Message is one message as the SMTP server took it.
type Message struct {
	From string
	To   []string
	Raw  []byte
}

// Mailbox is the SMTP server's backend: it keeps every message it took.
// Set User and Pass before Serve to require AUTH PLAIN with them.
type Mailbox struct {
	mu      sync.Mutex
	all     []Message
	arrived chan struct{} // signalled (without blocking) on each message
	refuse  int           // how many of the next messages to refuse with 451
	authed  []string      // the users who authenticated

	// User and Pass, when set, are the only credentials accepted, and a
	// sender must authenticate first.
	User, Pass string
}

// Authed returns the users who authenticated so far.
func (b *Mailbox) Authed() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.authed)
}

// NewSession is smtp.Backend's.
func (b *Mailbox) NewSession(*smtp.Conn) (smtp.Session, error) { return &smtpSession{box: b}, nil }

// Refuse makes the next n messages fail with a temporary error.
func (b *Mailbox) Refuse(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refuse = n
}

// Messages returns the messages received so far.
func (b *Mailbox) Messages() []Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.all)
}

// To returns the messages received so far for addr.
func (b *Mailbox) To(addr string) []Message {
	var out []Message
	for _, m := range b.Messages() {
		if slices.Contains(m.To, addr) {
			out = append(out, m)
		}
	}
	return out
}

// Await waits until cond holds of the messages received, for up to 30 s.
func (b *Mailbox) Await(t testing.TB, what string, cond func([]Message) bool) []Message {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		if msgs := b.Messages(); cond(msgs) {
			return msgs
		}
		select {
		case <-b.arrived:
		case <-deadline:
			t.Fatalf("waiting for %s: the mailbox holds %d messages", what, len(b.Messages()))
		}
	}
}

type smtpSession struct {
	box    *Mailbox
	authed bool
	from   string
	to     []string
}

func (s *smtpSession) AuthMechanisms() []string {
	if s.box.User == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (s *smtpSession) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, user, pass string) error {
		if user != s.box.User || pass != s.box.Pass {
			return errors.New("invalid credentials")
		}
		s.authed = true
		s.box.mu.Lock()
		s.box.authed = append(s.box.authed, user)
		s.box.mu.Unlock()
		return nil
	}), nil
}

func (s *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	if s.box.User != "" && !s.authed {
		return smtp.ErrAuthRequired
	}
	s.from = from
	return nil
}

func (s *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}

func (s *smtpSession) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.box.mu.Lock()
	defer s.box.mu.Unlock()
	if s.box.refuse > 0 {
		s.box.refuse--
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
	}
	s.box.all = append(s.box.all, Message{From: s.from, To: slices.Clone(s.to), Raw: raw})
	select {
	case s.box.arrived <- struct{}{}:
	default:
	}
	return nil
}

func (s *smtpSession) Reset()        { s.from, s.to = "", nil }
func (s *smtpSession) Logout() error { return nil }

// Serve serves box on a loopback port until the test ends, and returns
// the port; configure, when not nil, adjusts the server first (TLS).
func Serve(t testing.TB, box *Mailbox, configure func(*smtp.Server)) int {
	t.Helper()
	box.arrived = make(chan struct{}, 1)
	srv := smtp.NewServer(box)
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	if configure != nil {
		configure(srv)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// ---------------------------------------------------------------------------
// Parsing a message as a mail client would: net/mail and mime/multipart.

// Mail is a received message's parts and links.
type Mail struct {
	Header  mail.Header
	Subject string
	Text    string
	HTML    string
	Approve string // the approve link, "" when none
	Reject  string
}

var linkRE = regexp.MustCompile(`https?://[^\s"<>]+/d/[A-Za-z0-9_-]+`)

// Parse reads m as a mail client would (net/mail, mime/multipart, the
// quoted-printable decoded): a multipart/alternative message with a text
// and an HTML part whose decision links agree. It fails t otherwise.
func Parse(t testing.TB, m Message) *Mail {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(m.Raw))
	if err != nil {
		t.Fatalf("read message: %v", err)
	}
	out := &Mail{Header: msg.Header}
	dec := new(mime.WordDecoder)
	if out.Subject, err = dec.DecodeHeader(msg.Header.Get("Subject")); err != nil {
		t.Fatalf("subject: %v", err)
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		t.Fatalf("content type %q (%v): want multipart/alternative", msg.Header.Get("Content-Type"), err)
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		part, err := mr.NextPart() // decodes quoted-printable
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("part: %v", err)
		}
		body, err := io.ReadAll(part)
		if err != nil {
			t.Fatalf("read part: %v", err)
		}
		pt, _, _ := mime.ParseMediaType(part.Header.Get("Content-Type"))
		switch pt {
		case "text/plain":
			out.Text = string(body)
		case "text/html":
			out.HTML = string(body)
		default:
			t.Fatalf("unexpected part %q", pt)
		}
	}
	if out.Text == "" || out.HTML == "" {
		t.Fatalf("message lacks a text (%d bytes) or HTML (%d bytes) part", len(out.Text), len(out.HTML))
	}
	// Both parts carry the same links.
	for _, line := range strings.Split(out.Text, "\n") {
		switch {
		case strings.HasPrefix(line, "Approve: "):
			out.Approve = linkRE.FindString(line)
		case strings.HasPrefix(line, "Reject: "):
			out.Reject = linkRE.FindString(line)
		}
	}
	htmlLinks := linkRE.FindAllString(out.HTML, -1)
	want := slices.DeleteFunc([]string{out.Approve, out.Reject}, func(s string) bool { return s == "" })
	if !slices.Equal(htmlLinks, want) {
		t.Fatalf("the HTML part's links %q differ from the text part's %q", htmlLinks, want)
	}
	return out
}
