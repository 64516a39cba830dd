package notifications

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/defaults"
	"github.com/countersign/countersign/internal/maintenance"
	"github.com/countersign/countersign/internal/outboxhost"
	"github.com/countersign/countersign/internal/redact"
	"github.com/countersign/countersign/webhook"
	"go.opentelemetry.io/otel/trace"
)

// The defaults of a Target and of Options.
const (
	// The first four live in internal/defaults, which package config
	// reads too.
	DefaultTimeout        = defaults.NotificationTimeout
	DefaultMaxAttempts    = defaults.NotificationMaxAttempts
	DefaultBackoffInitial = defaults.NotificationBackoffInitial
	DefaultBackoffMax     = defaults.NotificationBackoffMax
	DefaultPollInterval   = time.Second
	DefaultMaxConcurrency = 4
)

// Backoff bounds the delay between two attempts: Initial after the first,
// doubling after each, never more than Max.
type Backoff struct {
	Initial time.Duration
	Max     time.Duration
}

// Delay is the wait after attempt number n (1 for the first) failed.
func (b Backoff) Delay(n int) time.Duration {
	d := b.Initial
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// Target is one receiver.
type Target struct {
	// URL receives the POSTs: http or https, without userinfo, written in
	// RFC 3986's characters. A token in its query is kept out of every error
	// and log line (they show it REDACTED).
	URL string
	// Events are the event types it is sent ("proposal.created", …).
	Events []cstype.EventType
	// Secret signs every request (Countersign-Signature); empty sends none.
	// Give each receiver its own: whoever holds a secret can sign anything
	// its verifiers accept, so a receiver must never hold one a webhook
	// backend or another receiver trusts.
	Secret []byte
	// Timeout bounds one request. Default DefaultTimeout.
	Timeout time.Duration
	// MaxAttempts bounds the attempts before a notification is failed.
	// Default DefaultMaxAttempts.
	MaxAttempts int
	// Backoff spaces the attempts. Defaults DefaultBackoffInitial and
	// DefaultBackoffMax.
	Backoff Backoff
}

// TargetName is the name under which the outbox knows a receiver: derived
// from its URL, so that it stays the same across restarts and processes
// that configure the same receiver, and reveals nothing of the URL in a
// notification's id.
func TargetName(rawURL string) string {
	s := sha256.Sum256([]byte(rawURL))
	return "t" + hex.EncodeToString(s[:8])
}

// Channel is an approver channel (Slack, email) as the outbox sees it: a
// target named Name, written to the store like a receiver's, whose
// notifications are handed to Deliver instead of being POSTed. Retries,
// backoff, failure after MaxAttempts and an operator's retry are the
// outbox's, as for a receiver.
type Channel struct {
	// Name is the channel's target name in the outbox ("slack", "email"):
	// lower-case, and never a receiver's (theirs start with "t" and 16 hex
	// digits, TargetName).
	Name string
	// Events are the event types it gets.
	Events []cstype.EventType
	// MaxAttempts and Backoff as a Target's; zero takes the defaults.
	MaxAttempts int
	Backoff     Backoff
	// Deliver makes one attempt. It gets the proposal as it stands now,
	// read again at every attempt; an error is a failed attempt, tried
	// again after the backoff. It must be idempotent: an attempt whose
	// worker died before recording it is made again.
	Deliver func(ctx context.Context, d Delivery) error
}

// Delivery is one attempt at one notification of a Channel.
type Delivery struct {
	// ID is the notification's id, the same at every attempt: a key for
	// what the channel sends, so that a repeated attempt sends nothing
	// twice.
	ID     string
	Tenant string
	Event  cstype.EventType
	// At is the event's time.
	At time.Time
	// Attempt counts the attempts, this one included.
	Attempt int
	// Proposal is the proposal the event is about, as it stands now.
	Proposal *cstype.Proposal
}

// channelName is what a Channel's Name may be: never a receiver's
// TargetName, which is "t" and 16 hex digits, so the two never collide.
var (
	channelName  = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)
	receiverName = regexp.MustCompile(`^t[0-9a-f]{16}$`)
)

// Options configures a Deliverer. Zero fields take the documented defaults.
type Options struct {
	// Engine is the engine whose store's outbox is delivered
	// (Engine.Outbox): the deliverer claims and records through it.
	Engine  *countersign.Engine
	Targets []Target
	// Channels are the approver channels (Slack, email) that receive the
	// outbox's notifications themselves rather than as signed POSTs.
	Channels []Channel
	// Render returns the proposal object of a notification's body: the
	// server's wire type (server.RenderProposal).
	Render func(p *cstype.Proposal) (json.RawMessage, error)
	// Owner names this worker in its leases. Default "notifications".
	Owner string
	// PollInterval is how often due notifications are looked for. Default
	// DefaultPollInterval.
	PollInterval time.Duration
	// LeaseDuration is how long a claim holds a notification. It must be
	// longer than every target's timeout; default twice the longest plus
	// ten seconds.
	LeaseDuration time.Duration
	// MaxConcurrency bounds the requests in flight. Default
	// DefaultMaxConcurrency.
	MaxConcurrency int
	// Client sends the requests. Default: a client with bounded dial, TLS
	// handshake and response headers. Whatever the client, a redirect is
	// never followed: the 3xx answer is a failed attempt, so the signature
	// and the body never reach a host the receiver names (see
	// docs/decisions/0018-signing-secrets-and-redirects.md).
	Client *http.Client
	// Now is the clock of the signatures' timestamps. Default time.Now.
	Now func() time.Time
	// TracerProvider, if set, gets a span for each delivery attempt
	// (countersign.notify, with the proposal id). Default nil: none.
	TracerProvider trace.TracerProvider
	// Logger receives the failures of attempts. Default slog.Default().
	Logger *slog.Logger
	// Observe, when set, is told each attempt's receiver and result
	// ("delivered", "retry" or "failed"): the receiver is "webhook" for a
	// Target and the channel's Name for a Channel (server.Metrics'
	// NotificationAttempt counts them).
	Observe func(receiver, result string)
}

// Deliverer delivers the outbox's due notifications to their targets: the
// requests are made here, the claims and records by its service in
// internal/maintenance.
type Deliverer struct {
	o   Options
	svc *maintenance.NotificationDelivery
}

// New validates the options and returns a Deliverer.
func New(opts Options) (*Deliverer, error) {
	if opts.Engine == nil {
		return nil, errors.New("notifications: Options.Engine is nil")
	}
	if opts.Render == nil {
		return nil, errors.New("notifications: Options.Render is nil")
	}
	d := &Deliverer{}
	targets := map[string]*Target{} // by TargetName
	var longest time.Duration
	for i, t := range opts.Targets {
		// Errors show the URL redacted: it may hold a token.
		u, err := url.Parse(t.URL)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			return nil, fmt.Errorf("notifications: Targets[%d].URL %q: want an http or https URL", i, redact.URL(t.URL))
		case u.User != nil:
			return nil, fmt.Errorf("notifications: Targets[%d].URL %q: must not carry userinfo: requests are signed with Secret", i, redact.URL(t.URL))
		}
		if err := redact.CheckURL(t.URL); err != nil {
			return nil, fmt.Errorf("notifications: Targets[%d].URL: %w", i, err)
		}
		if len(t.Events) == 0 {
			return nil, fmt.Errorf("notifications: Targets[%d].Events is empty", i)
		}
		t.Timeout = cmp.Or(t.Timeout, DefaultTimeout)
		t.MaxAttempts = cmp.Or(t.MaxAttempts, DefaultMaxAttempts)
		t.Backoff.Initial = cmp.Or(t.Backoff.Initial, DefaultBackoffInitial)
		t.Backoff.Max = cmp.Or(t.Backoff.Max, DefaultBackoffMax)
		switch {
		case t.Timeout < 0:
			return nil, fmt.Errorf("notifications: Targets[%d].Timeout is negative", i)
		case t.MaxAttempts < 0:
			return nil, fmt.Errorf("notifications: Targets[%d].MaxAttempts is negative", i)
		case t.Backoff.Initial < 0 || t.Backoff.Max < t.Backoff.Initial:
			return nil, fmt.Errorf("notifications: Targets[%d].Backoff: want 0 < initial <= max", i)
		}
		name := TargetName(t.URL)
		if _, dup := targets[name]; dup {
			return nil, fmt.Errorf("notifications: Targets[%d].URL %q is configured twice", i, redact.URL(t.URL))
		}
		targets[name] = &t
		longest = max(longest, t.Timeout)
	}
	channels := map[string]bool{}
	for i, c := range opts.Channels {
		switch {
		case !channelName.MatchString(c.Name) || receiverName.MatchString(c.Name):
			return nil, fmt.Errorf("notifications: Channels[%d].Name %q: want 1..32 lower-case letters, digits or '-'", i, c.Name)
		case channels[c.Name]:
			return nil, fmt.Errorf("notifications: Channels[%d].Name %q is configured twice", i, c.Name)
		case len(c.Events) == 0:
			return nil, fmt.Errorf("notifications: Channels[%d].Events is empty", i)
		case c.Deliver == nil:
			return nil, fmt.Errorf("notifications: Channels[%d].Deliver is nil", i)
		case c.MaxAttempts < 0:
			return nil, fmt.Errorf("notifications: Channels[%d].MaxAttempts is negative", i)
		case c.Backoff.Initial < 0 || c.Backoff.Max < c.Backoff.Initial:
			return nil, fmt.Errorf("notifications: Channels[%d].Backoff: want 0 < initial <= max", i)
		}
		channels[c.Name] = true
	}
	opts.Owner = cmp.Or(opts.Owner, "notifications")
	opts.PollInterval = cmp.Or(opts.PollInterval, DefaultPollInterval)
	opts.MaxConcurrency = cmp.Or(opts.MaxConcurrency, DefaultMaxConcurrency)
	opts.LeaseDuration = cmp.Or(opts.LeaseDuration, 2*longest+10*time.Second)
	switch {
	case opts.PollInterval < 0:
		return nil, errors.New("notifications: Options.PollInterval is negative")
	case opts.MaxConcurrency < 0:
		return nil, errors.New("notifications: Options.MaxConcurrency is negative")
	case opts.LeaseDuration <= longest:
		return nil, fmt.Errorf("notifications: Options.LeaseDuration %v must be longer than the longest timeout %v", opts.LeaseDuration, longest)
	}
	if opts.Client == nil {
		opts.Client = &http.Client{
			Transport: &http.Transport{
				Proxy:                  http.ProxyFromEnvironment,
				DialContext:            (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
				TLSHandshakeTimeout:    5 * time.Second,
				MaxResponseHeaderBytes: 64 << 10,
			},
		}
	}
	// A copy, so that the caller's client keeps its own policy for its other
	// uses. net/http copies custom headers such as Countersign-Signature to
	// any host a redirect names, and resends the body on 307 and 308.
	client := *opts.Client
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	opts.Client = &client
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	d.o = opts
	cfg := maintenance.NotificationConfig{Body: d.render, Owner: opts.Owner, PollInterval: opts.PollInterval,
		LeaseDuration: opts.LeaseDuration, MaxConcurrency: opts.MaxConcurrency, Logger: opts.Logger}
	if observe := opts.Observe; observe != nil {
		cfg.Observe = func(target, result string) {
			receiver := "webhook"
			if channels[target] {
				receiver = target
			}
			observe(receiver, result)
		}
	}
	if opts.TracerProvider != nil {
		cfg.Tracer = opts.TracerProvider.Tracer(countersign.TracerName)
	}
	for _, t := range opts.Targets {
		t := targets[TargetName(t.URL)]
		cfg.Targets = append(cfg.Targets, maintenance.NotificationTarget{
			Name: TargetName(t.URL), Events: t.Events, MaxAttempts: t.MaxAttempts, Backoff: t.Backoff.Delay,
			Send: func(ctx context.Context, id string, body []byte) error { return d.post(ctx, t, id, body) },
		})
	}
	for _, c := range opts.Channels {
		b := Backoff{Initial: cmp.Or(c.Backoff.Initial, DefaultBackoffInitial), Max: cmp.Or(c.Backoff.Max, DefaultBackoffMax)}
		cfg.Targets = append(cfg.Targets, maintenance.NotificationTarget{
			Name: c.Name, Events: c.Events, MaxAttempts: cmp.Or(c.MaxAttempts, DefaultMaxAttempts), Backoff: b.Delay,
			Deliver: func(ctx context.Context, e *cstype.OutboxEntry, p *cstype.Proposal) error {
				return c.Deliver(ctx, Delivery{ID: e.ID, Tenant: e.Tenant, Event: e.EventType, At: e.At, Attempt: e.Attempts, Proposal: p})
			},
		})
	}
	d.svc = maintenance.NewNotificationDelivery(opts.Engine.Outbox(outboxhost.Grant()), cfg)
	return d, nil
}

// Sync writes the targets to the store, so that events appended from now
// on are announced to them (the outbox's SetNotificationTargets). Run does
// it too before it delivers; a process that serves requests before its
// worker runs calls Sync at start, so that those requests' events are
// announced as well.
func (d *Deliverer) Sync(ctx context.Context) error { return d.svc.Sync(ctx) }

// Run delivers due notifications until ctx ends and returns ctx's error.
// It writes the targets to the store first (Sync), then keeps up to
// MaxConcurrency deliveries in flight and claims only as many as it has
// free slots, so a receiver that is slow to answer holds a slot, not the
// others' notifications. It looks for due notifications every PollInterval
// and whenever a delivery ends; while the store cannot be reached it backs
// off, and another failure is logged and tried again at the next poll.
// Deliveries in flight when ctx ends are abandoned (their lease runs out and
// another worker sends them again).
//
// countersign's Worker runs it beside its executions when given the
// Deliverer (WorkerOptions.Notifications): run one or the other, not both.
// The loop and the store work are internal/maintenance's; this package says
// what a receiver gets.
func (d *Deliverer) Run(ctx context.Context) error { return d.svc.Run(ctx) }

// DeliverDue claims up to MaxConcurrency due notifications, delivers them
// concurrently, records each attempt, and returns how many it claimed.
func (d *Deliverer) DeliverDue(ctx context.Context) (int, error) { return d.svc.DeliverDue(ctx) }

// body is the JSON a receiver gets.
type body struct {
	ID       string          `json:"id"`
	Type     string          `json:"type"`
	Proposal json.RawMessage `json:"proposal"`
	At       time.Time       `json:"at"`
}

// render is the body of a notification's first attempt.
func (d *Deliverer) render(e *cstype.OutboxEntry, p *cstype.Proposal) ([]byte, error) {
	rendered, err := d.o.Render(p)
	if err != nil {
		return nil, fmt.Errorf("render proposal %s: %w", e.ProposalID, err)
	}
	return json.Marshal(body{ID: e.ID, Type: string(e.EventType), Proposal: rendered, At: e.At.UTC()})
}

// post sends one request; nil means the receiver answered 2xx.
func (d *Deliverer) post(ctx context.Context, t *Target, id string, payload []byte) error {
	ctx, cancel := context.WithTimeout(ctx, t.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(payload))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", id)
	req.Header.Set("User-Agent", "countersign-notifications")
	if len(t.Secret) > 0 {
		req.Header.Set(webhook.SignatureHeader, webhook.Sign(t.Secret, d.o.Now(), payload))
	}
	resp, err := d.o.Client.Do(req)
	if err != nil {
		// net/http's *url.Error repeats the whole URL, token and all: the
		// target is known by its name, so keep only what went wrong.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return fmt.Errorf("no answer from the receiver: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode <= 399:
		return fmt.Errorf("receiver answered %s: redirects are not followed; configure the URL it names", resp.Status)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return fmt.Errorf("receiver answered %s", resp.Status)
	}
	return nil
}
