package maintenance

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/internal/redact"
	"github.com/countersign/countersign/store"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Defaults of NotificationDelivery.
const (
	DefaultNotificationPoll        = time.Second
	DefaultNotificationConcurrency = 4
	// recordTimeout bounds the write of one attempt's result, which is made
	// even when the service is stopping.
	recordTimeout = 10 * time.Second
	// maxAttemptError bounds the error text an attempt stores.
	maxAttemptError = 500
)

// NotificationStore is what NotificationDelivery needs of the store: the
// outbox, and the proposal a notification announces.
type NotificationStore interface {
	SetNotificationTargets(ctx context.Context, params *store.SetNotificationTargetsParams) error
	ClaimNotifications(ctx context.Context, params *store.ClaimNotificationsParams) ([]*store.OutboxEntry, error)
	RecordDelivery(ctx context.Context, params *store.RecordDeliveryParams) (*store.OutboxEntry, error)
	GetProposal(ctx context.Context, params *store.GetProposalParams) (*store.Proposal, error)
}

// NotificationTarget is one receiver as the delivery sees it: its name in
// the outbox, the events it is sent, how often and how far apart it is
// tried, and how one attempt is sent (the notifications package's signed
// POST).
type NotificationTarget struct {
	Name        string
	Events      []store.EventType
	MaxAttempts int
	// Backoff is the wait after attempt n (1 for the first) failed.
	Backoff func(n int) time.Duration
	// Send makes one attempt with the notification's id and body; nil
	// means the receiver accepted it.
	Send func(ctx context.Context, id string, body []byte) error
	// Deliver, when set, makes each attempt instead of Body and Send: it
	// gets the notification and its proposal as it stands at that attempt
	// (read again each time), and renders what it sends itself. The
	// approver channels (Slack, email) deliver so: a message must show the
	// proposal as it is when sent, not as it was at the first attempt.
	Deliver func(ctx context.Context, e *store.OutboxEntry, p *store.Proposal) error
}

// NotificationConfig configures NotificationDelivery. Zero fields take the
// defaults; the notifications package validates the rest.
type NotificationConfig struct {
	Targets []NotificationTarget
	// Body renders the body of a notification's first attempt from the
	// proposal it announces; later attempts send the body stored then.
	Body func(e *store.OutboxEntry, p *store.Proposal) ([]byte, error)
	// Owner names this process in the claims' leases.
	Owner string
	// PollInterval is how often due notifications are looked for, besides
	// whenever a delivery ends. Default DefaultNotificationPoll.
	PollInterval time.Duration
	// LeaseDuration is how long a claim holds a notification: longer than
	// any attempt takes.
	LeaseDuration time.Duration
	// MaxConcurrency bounds the attempts in flight. Default
	// DefaultNotificationConcurrency.
	MaxConcurrency int
	// Logger receives the failures. Default slog.Default().
	Logger *slog.Logger
	// Observe, when set, is told each attempt's target and result
	// (delivered, retry, failed) once it is recorded or its record
	// failed: the metrics' count of attempts.
	Observe func(target, result string)
	// Tracer, if set, gets a span for each delivery attempt
	// (countersign.notify). Default nil: none.
	Tracer trace.Tracer
}

// NotificationDelivery delivers the notification outbox: it writes the
// targets to the store (Sync), claims due notifications under a lease, has
// each attempt sent, and records its result with the lease's token — the
// store work of delivery, while the notifications package says what a
// receiver gets. Several processes share the outbox; the leases keep them
// from sending one notification twice at once.
type NotificationDelivery struct {
	loop
	store   NotificationStore
	cfg     NotificationConfig
	targets map[string]*NotificationTarget // by name
	names   []string
}

// NewNotificationDelivery returns the delivery of st's outbox to targets.
func NewNotificationDelivery(st NotificationStore, cfg NotificationConfig) *NotificationDelivery {
	cfg.PollInterval = cmp.Or(cfg.PollInterval, DefaultNotificationPoll)
	cfg.MaxConcurrency = cmp.Or(cfg.MaxConcurrency, DefaultNotificationConcurrency)
	d := &NotificationDelivery{loop: newLoop("notifications", cfg.PollInterval, cfg.Logger), store: st, cfg: cfg,
		targets: map[string]*NotificationTarget{}}
	for i := range cfg.Targets {
		t := &cfg.Targets[i]
		d.targets[t.Name] = t
		d.names = append(d.names, t.Name)
	}
	return d
}

// Sync writes the targets to the store, so that events appended from now
// on are announced to them (store.Outbox.SetNotificationTargets).
func (d *NotificationDelivery) Sync(ctx context.Context) error {
	params := &store.SetNotificationTargetsParams{}
	for _, name := range d.names {
		params.Targets = append(params.Targets, store.NotificationTarget{Name: name, Events: d.targets[name].Events})
	}
	if err := d.store.SetNotificationTargets(ctx, params); err != nil {
		return fmt.Errorf("notifications: sync targets: %w", err)
	}
	return nil
}

// Run implements Service. It first writes the targets to the store (trying
// again, paced like any failure of the loop, until it can), so that a
// process that only runs a worker announces its targets' events too. Then
// it keeps up to MaxConcurrency attempts in flight and claims only as many
// as it has free slots, so a receiver slow to answer holds a slot, not the
// others' notifications. It claims every PollInterval and whenever an
// attempt ends. Attempts in flight when ctx ends are abandoned: their lease
// runs out and another claim sends them again.
func (d *NotificationDelivery) Run(ctx context.Context) error {
	if err := d.syncUntilDone(ctx); err != nil {
		return err
	}
	if len(d.names) == 0 {
		<-ctx.Done()
		return ctx.Err()
	}
	poll := time.NewTimer(jittered(d.interval))
	defer poll.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	done := make(chan struct{}, d.cfg.MaxConcurrency)
	inflight := 0
	var asked []chan error // triggers waiting for the next claim
	var retry <-chan time.Time
	for {
		if free := d.cfg.MaxConcurrency - inflight; free > 0 && retry == nil {
			claimed, err := d.claim(ctx, free)
			for _, e := range claimed {
				inflight++
				wg.Go(func() {
					d.deliver(ctx, e)
					done <- struct{}{}
				})
			}
			for _, ch := range asked {
				ch <- err
			}
			asked = nil
			switch {
			case err == nil:
				d.out.OK()
				if len(claimed) == free {
					continue // there may be more due
				}
			case ctx.Err() != nil:
			default:
				if pause, down := d.out.Failed(err); down {
					retry = time.After(pause)
				} else {
					d.log.Error("notifications: claim", "err", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			inflight--
		case <-poll.C:
			poll.Reset(jittered(d.interval))
		case <-retry:
			retry = nil
		case ch := <-d.trigger:
			asked, retry = append(asked, ch), nil
		}
	}
}

// syncUntilDone writes the targets, trying again until it succeeds or ctx
// ends.
func (d *NotificationDelivery) syncUntilDone(ctx context.Context) error {
	for {
		err := d.Sync(ctx)
		if err == nil {
			d.out.OK()
			return nil
		}
		wait := d.next(ctx, err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

func (d *NotificationDelivery) claim(ctx context.Context, limit int) ([]*store.OutboxEntry, error) {
	claimed, err := d.store.ClaimNotifications(ctx, &store.ClaimNotificationsParams{
		Owner: d.cfg.Owner, LeaseDuration: d.cfg.LeaseDuration, Limit: limit, Targets: d.names,
	})
	if err != nil {
		return nil, fmt.Errorf("notifications: claim: %w", err)
	}
	return claimed, nil
}

// DeliverDue claims up to MaxConcurrency due notifications, makes their
// attempts concurrently, records each, and returns how many it claimed.
func (d *NotificationDelivery) DeliverDue(ctx context.Context) (int, error) {
	if len(d.names) == 0 {
		return 0, nil
	}
	claimed, err := d.claim(ctx, d.cfg.MaxConcurrency)
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
func (d *NotificationDelivery) deliver(ctx context.Context, e *store.OutboxEntry) {
	if d.cfg.Tracer == nil {
		d.deliverIn(ctx, e)
		return
	}
	// An attempt is the outbox's own work, not a step of the call: a span
	// of its own, found by its proposal id.
	ctx, span := d.cfg.Tracer.Start(ctx, "countersign.notify", trace.WithAttributes(
		attribute.String("countersign.proposal.id", e.ProposalID), attribute.String("countersign.tenant", e.Tenant),
		attribute.String("countersign.notification.id", e.ID), attribute.String("countersign.notification.target", e.Target),
		attribute.String("countersign.notification.event", string(e.EventType)), attribute.Int("countersign.attempt", e.Attempts)))
	result := d.deliverIn(ctx, e)
	span.SetAttributes(attribute.String("countersign.notification.result", string(result)))
	if result != store.DeliveryDelivered {
		span.SetStatus(codes.Error, "notification not delivered: "+string(result))
	}
	span.End()
}

// deliverIn is deliver, in its span when tracing is on; it returns the
// attempt's result.
func (d *NotificationDelivery) deliverIn(ctx context.Context, e *store.OutboxEntry) store.DeliveryResult {
	t := d.targets[e.Target]
	rec := &store.RecordDeliveryParams{Tenant: e.Tenant, ID: e.ID, LeaseToken: e.LeaseToken}
	var attemptErr error
	switch {
	case e.Attempts > t.MaxAttempts:
		// A worker died during the last allowed attempt: that one counted.
		attemptErr = fmt.Errorf("attempts spent: the worker making attempt %d of %d stopped before recording it", e.Attempts-1, t.MaxAttempts)
		rec.Result = store.DeliveryFailed
	default:
		attemptErr = d.attempt(ctx, t, e, rec)
		switch {
		case attemptErr == nil:
			rec.Result = store.DeliveryDelivered
		case e.Attempts >= t.MaxAttempts:
			rec.Result = store.DeliveryFailed
		default:
			rec.Result, rec.RetryAfter = store.DeliveryRetry, t.Backoff(e.Attempts)
		}
	}
	if attemptErr != nil {
		// Whatever failed, its text is stored, shown to operators and
		// logged: no URL in it keeps a token.
		attemptErr = redact.Error(attemptErr)
		rec.Error = truncate(attemptErr.Error(), maxAttemptError)
		d.log.WarnContext(ctx, "notifications: attempt failed", "notification", e.ID, "attempt", e.Attempts, "result", rec.Result, "err", attemptErr)
	}
	// The attempt is recorded even when ctx ended meanwhile (a shutdown),
	// so that a delivered notification is not sent again for nothing.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if _, err := d.store.RecordDelivery(rctx, rec); err != nil {
		d.log.WarnContext(ctx, "notifications: record attempt", "notification", e.ID, "err", err)
	}
	if d.cfg.Observe != nil {
		d.cfg.Observe(e.Target, string(rec.Result))
	}
	return rec.Result
}

// attempt makes one attempt of e to t: Deliver with the proposal as it
// stands, or Send with the body rendered at the first attempt (and kept in
// rec for the later ones).
func (d *NotificationDelivery) attempt(ctx context.Context, t *NotificationTarget, e *store.OutboxEntry, rec *store.RecordDeliveryParams) error {
	if t.Deliver != nil {
		p, err := d.store.GetProposal(ctx, &store.GetProposalParams{Tenant: e.Tenant, ID: e.ProposalID})
		if err != nil {
			return fmt.Errorf("read proposal %s: %w", e.ProposalID, err)
		}
		return t.Deliver(ctx, e.Clone(), p)
	}
	body := e.Payload
	if body == nil {
		var err error
		if body, err = d.body(ctx, e); err != nil {
			return err
		}
		rec.Payload = body
	}
	return t.Send(ctx, e.ID, body)
}

// body renders the first attempt's body from the proposal as it stands.
func (d *NotificationDelivery) body(ctx context.Context, e *store.OutboxEntry) ([]byte, error) {
	p, err := d.store.GetProposal(ctx, &store.GetProposalParams{Tenant: e.Tenant, ID: e.ProposalID})
	if err != nil {
		return nil, fmt.Errorf("read proposal %s: %w", e.ProposalID, err)
	}
	return d.cfg.Body(e, p)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
