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
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/internal/defaults"
	"github.com/countersign/countersign/internal/redact"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/webhook"
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

// Store is what a Deliverer needs of the store: its outbox and the
// proposal a notification announces.
type Store interface {
	store.Outbox
	GetProposal(ctx context.Context, params *store.GetProposalParams) (*store.Proposal, error)
}

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
	Events []store.EventType
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

// Options configures a Deliverer. Zero fields take the documented defaults.
type Options struct {
	Store   Store
	Targets []Target
	// Render returns the proposal object of a notification's body: the
	// server's wire type (server.RenderProposal).
	Render func(p *store.Proposal) (json.RawMessage, error)
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
	// Logger receives the failures of attempts. Default slog.Default().
	Logger *slog.Logger
}

// Deliverer delivers the outbox's due notifications to their targets.
type Deliverer struct {
	o       Options
	targets map[string]*Target // by TargetName
	names   []string
}

// New validates the options and returns a Deliverer.
func New(opts Options) (*Deliverer, error) {
	if opts.Store == nil {
		return nil, errors.New("notifications: Options.Store is nil")
	}
	if opts.Render == nil {
		return nil, errors.New("notifications: Options.Render is nil")
	}
	d := &Deliverer{targets: map[string]*Target{}}
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
		if _, dup := d.targets[name]; dup {
			return nil, fmt.Errorf("notifications: Targets[%d].URL %q is configured twice", i, redact.URL(t.URL))
		}
		d.targets[name] = &t
		d.names = append(d.names, name)
		longest = max(longest, t.Timeout)
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
	return d, nil
}

// Sync writes the targets to the store, so that events appended from now
// on are announced to them (store.Outbox.SetNotificationTargets).
func (d *Deliverer) Sync(ctx context.Context) error {
	params := &store.SetNotificationTargetsParams{}
	for _, name := range d.names {
		params.Targets = append(params.Targets, store.NotificationTarget{Name: name, Events: d.targets[name].Events})
	}
	if err := d.o.Store.SetNotificationTargets(ctx, params); err != nil {
		return fmt.Errorf("notifications: sync targets: %w", err)
	}
	return nil
}

// Run delivers due notifications until ctx ends and returns ctx's error.
// It keeps up to MaxConcurrency deliveries in flight and claims only as
// many as it has free slots, so a receiver that is slow to answer holds a
// slot, not the others' notifications. It looks for due notifications every
// PollInterval and whenever a delivery ends; a failing store is logged and
// tried again at the next poll. Deliveries in flight when ctx ends are
// abandoned (their lease runs out and another worker sends them again).
func (d *Deliverer) Run(ctx context.Context) error {
	if len(d.names) == 0 {
		<-ctx.Done()
		return ctx.Err()
	}
	t := time.NewTicker(d.o.PollInterval)
	defer t.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	done := make(chan struct{}, d.o.MaxConcurrency)
	inflight := 0
	for {
		if free := d.o.MaxConcurrency - inflight; free > 0 {
			claimed, err := d.claim(ctx, free)
			if err != nil && ctx.Err() == nil {
				d.o.Logger.Error("notifications: claim", "err", err)
			}
			for _, e := range claimed {
				inflight++
				wg.Go(func() {
					d.deliver(ctx, e)
					done <- struct{}{}
				})
			}
			if err == nil && len(claimed) == free {
				continue // there may be more due
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			inflight--
		case <-t.C:
		}
	}
}

func (d *Deliverer) claim(ctx context.Context, limit int) ([]*store.OutboxEntry, error) {
	claimed, err := d.o.Store.ClaimNotifications(ctx, &store.ClaimNotificationsParams{
		Owner: d.o.Owner, LeaseDuration: d.o.LeaseDuration, Limit: limit, Targets: d.names,
	})
	if err != nil {
		return nil, fmt.Errorf("notifications: claim: %w", err)
	}
	return claimed, nil
}

// DeliverDue claims up to MaxConcurrency due notifications, delivers them
// concurrently, records each attempt, and returns how many it claimed.
func (d *Deliverer) DeliverDue(ctx context.Context) (int, error) {
	if len(d.names) == 0 {
		return 0, nil
	}
	claimed, err := d.claim(ctx, d.o.MaxConcurrency)
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	for _, e := range claimed {
		wg.Go(func() { d.deliver(ctx, e) })
	}
	wg.Wait()
	return len(claimed), nil
}

// deliver makes one attempt of e and records it.
func (d *Deliverer) deliver(ctx context.Context, e *store.OutboxEntry) {
	t := d.targets[e.Target]
	rec := &store.RecordDeliveryParams{Tenant: e.Tenant, ID: e.ID, LeaseToken: e.LeaseToken}
	var attemptErr error
	switch {
	case e.Attempts > t.MaxAttempts:
		// A worker died during the last allowed attempt: that one counted.
		attemptErr = fmt.Errorf("attempts spent: the worker making attempt %d of %d stopped before recording it", e.Attempts-1, t.MaxAttempts)
		rec.Result = store.DeliveryFailed
	default:
		body := e.Payload
		if body == nil {
			body, attemptErr = d.payload(ctx, e)
			rec.Payload = body
		}
		if attemptErr == nil {
			attemptErr = d.post(ctx, t, e.ID, body)
		}
		switch {
		case attemptErr == nil:
			rec.Result = store.DeliveryDelivered
		case e.Attempts >= t.MaxAttempts:
			rec.Result = store.DeliveryFailed
		default:
			rec.Result, rec.RetryAfter = store.DeliveryRetry, t.Backoff.Delay(e.Attempts)
		}
	}
	if attemptErr != nil {
		// Whatever failed, its text is stored, shown to operators and
		// logged: no URL in it keeps a token.
		attemptErr = redact.Error(attemptErr)
		rec.Error = truncate(attemptErr.Error(), 500)
		d.o.Logger.Warn("notifications: attempt failed", "notification", e.ID, "attempt", e.Attempts, "result", rec.Result, "err", attemptErr)
	}
	// The attempt is recorded even when ctx ended meanwhile (a shutdown),
	// so that a delivered notification is not sent again for nothing.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := d.o.Store.RecordDelivery(rctx, rec); err != nil {
		d.o.Logger.Warn("notifications: record attempt", "notification", e.ID, "err", err)
	}
}

// body is the JSON a receiver gets.
type body struct {
	ID       string          `json:"id"`
	Type     string          `json:"type"`
	Proposal json.RawMessage `json:"proposal"`
	At       time.Time       `json:"at"`
}

func (d *Deliverer) payload(ctx context.Context, e *store.OutboxEntry) ([]byte, error) {
	p, err := d.o.Store.GetProposal(ctx, &store.GetProposalParams{Tenant: e.Tenant, ID: e.ProposalID})
	if err != nil {
		return nil, fmt.Errorf("read proposal %s: %w", e.ProposalID, err)
	}
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

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
