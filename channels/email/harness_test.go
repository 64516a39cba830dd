package email_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/channels/email"
	"github.com/countersign/countersign/channels/email/emailtest"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/teststores"
	"github.com/countersign/countersign/notifications"
	"github.com/countersign/countersign/server"
	"github.com/countersign/countersign/store"
)

// ---------------------------------------------------------------------------
// The harness: an engine on a store, the email channel with its pages on an
// httptest server, and a worker delivering the outbox to the channel.

type refundInput struct {
	Amount   float64 `json:"amount"`
	Customer string  `json:"customer"`
	Note     string  `json:"note,omitempty"`
}

// The actors: alice asks (through her agent); bob and carol (finance)
// approve; olga operates; each has an address, alice's too (she must never
// be mailed).
var addresses = map[string]email.Address{
	"alice": {Email: "alice@acme.example", Roles: []string{"finance"}},
	"bob":   {Email: "bob@acme.example", Roles: []string{"finance"}},
	"carol": {Email: "carol@acme.example", Roles: []string{"finance"}},
	"olga":  {Email: "olga@acme.example", Roles: []string{"operator"}},
}

var (
	alice = countersign.Identity{Tenant: "acme", Actor: "alice", Kind: countersign.KindAgent}
	carol = countersign.Identity{Tenant: "acme", Actor: "carol", Roles: []string{"finance"}, Kind: countersign.KindHuman}
	olga  = countersign.Identity{Tenant: "acme", Actor: "olga", Roles: []string{"operator"}, Kind: countersign.KindHuman}
)

// policy: refunds go to finance by email; bulk refunds need two
// approvals; wires need a passkey; "quiet" actions notify nobody.
var policy = &countersign.Policy{Rules: []countersign.Rule{{
	Match: "payments.refund", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"},
	Mode: countersign.ModeIndependent, Notify: []string{"email"}, TTL: 24 * time.Hour,
}, {
	Match: "payments.bulk", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}, Quorum: 2,
	Mode: countersign.ModeIndependent, Notify: []string{"email"}, TTL: 24 * time.Hour,
}, {
	Match: "payments.wire", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"},
	Mode: countersign.ModeIndependent, Notify: []string{"email"}, StepUp: countersign.StepUpPasskey, TTL: 24 * time.Hour,
}, {
	Match: "payments.quiet", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"},
	Mode: countersign.ModeIndependent, TTL: 24 * time.Hour,
}}}

// testClock is the real time moved on by what Advance added: the outbox's
// backoff runs out as it would, and a test reaches a link's expiry without
// waiting for it.
type testClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().UTC().Add(c.offset)
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

type harness struct {
	t       testing.TB
	engine  *countersign.Engine
	channel *email.Channel
	box     *emailtest.Mailbox
	url     string // the pages' server, which is the channel's public URL
	clock   *testClock
	calls   int
}

// harnessOptions vary the harness.
type harnessOptions struct {
	box       *emailtest.Mailbox
	configure func(*smtp.Server) // the SMTP server
	smtp      func(*email.SMTP)  // the channel's SMTP options, port set
	linkTTL   time.Duration
}

func newHarness(t testing.TB, open func(now func() time.Time) store.Store, ho harnessOptions) *harness {
	t.Helper()
	clock := &testClock{}
	h := &harness{t: t, clock: clock, box: ho.box}
	if h.box == nil {
		h.box = &emailtest.Mailbox{}
	}
	port := emailtest.Serve(t, h.box, ho.configure)
	var actions []*countersign.Action
	for _, name := range []string{"payments.refund", "payments.bulk", "payments.wire", "payments.quiet"} {
		a, err := countersign.NewAction(countersign.ActionSpec[refundInput]{
			Name: name, Confirmation: countersign.Confirmation{Title: "Refund {amount} EUR to {customer}"},
			Execute: func(context.Context, *countersign.ExecuteRequest, refundInput) (*countersign.Receipt, error) {
				return &countersign.Receipt{ID: "rf"}, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		actions = append(actions, a)
	}
	quiet := slog.New(slog.DiscardHandler)
	engine, err := countersign.New(countersign.Options{Store: open(clock.Now), Policy: policy, Actions: actions, Logger: quiet, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	h.engine = engine
	var handler http.Handler = http.NotFoundHandler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	h.url = srv.URL
	s := email.SMTP{Host: "127.0.0.1", Port: port, TLS: email.TLSNone, Timeout: 10 * time.Second}
	if ho.smtp != nil {
		ho.smtp(&s)
	}
	h.channel, err = email.New(email.Options{
		Engine: engine, PublicURL: srv.URL, Tenant: "acme", From: "approvals@acme.example", Addresses: addresses,
		SMTP: s, LinkTTL: ho.linkTTL, Logger: quiet, Now: clock.Now,
		Backoff: notifications.Backoff{Initial: 20 * time.Millisecond, Max: 40 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/d/", h.channel.Handler())
	handler = mux

	d, err := notifications.New(notifications.Options{
		Engine: engine, Channels: []notifications.Channel{h.channel.Notifications()}, Render: server.RenderProposal,
		PollInterval: 10 * time.Millisecond, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The outbox announces events appended after its targets are written.
	if err := d.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	return h
}

// call makes alice's agent call action, and returns the pending proposal.
func (h *harness) call(action string, amount float64) *cstype.Proposal {
	h.t.Helper()
	h.calls++
	res, err := h.engine.Call(h.t.Context(), &countersign.Call{
		Identity: alice, ThreadID: "t1", ToolCallID: fmt.Sprintf("call_%d", h.calls), Action: action,
		Input: json.RawMessage(fmt.Sprintf(`{"amount": %g, "customer": "c_%d", "note": "line one\nline <b>two</b> \u202e"}`, amount, h.calls)),
	})
	if err != nil || res.Proposal == nil || res.Proposal.Status != cstype.StatusPending {
		h.t.Fatalf("call %s: %v %+v", action, err, res)
	}
	return res.Proposal
}

// proposal reads a proposal afresh, as carol may see it.
func (h *harness) proposal(id string) *cstype.Proposal {
	h.t.Helper()
	p, err := h.engine.Proposal(h.t.Context(), carol, id)
	if err != nil {
		h.t.Fatalf("read proposal %s: %v", id, err)
	}
	return p
}

// mailFor waits for want messages about proposal p to addr, and parses
// the latest.
func (h *harness) mailFor(addr string, p *cstype.Proposal, want int) *emailtest.Mail {
	h.t.Helper()
	var mine []*emailtest.Mail
	h.box.Await(h.t, fmt.Sprintf("%d message(s) to %s about %s", want, addr, p.ID), func(all []emailtest.Message) bool {
		mine = h.about(all, addr, p)
		return len(mine) >= want
	})
	return mine[len(mine)-1]
}

// about returns the messages to addr about proposal p, parsed.
func (h *harness) about(msgs []emailtest.Message, addr string, p *cstype.Proposal) []*emailtest.Mail {
	h.t.Helper()
	var customer struct{ Customer string }
	if err := json.Unmarshal(p.Input, &customer); err != nil {
		h.t.Fatal(err)
	}
	var out []*emailtest.Mail
	for _, m := range msgs {
		if !slices.Contains(m.To, addr) {
			continue
		}
		if pm := emailtest.Parse(h.t, m); strings.Contains(pm.Text, `"customer": "`+customer.Customer+`"`) {
			out = append(out, pm)
		}
	}
	return out
}

// bind opens stores of open for t.
func bind(t *testing.T, open teststores.Opener) func(now func() time.Time) store.Store {
	return func(now func() time.Time) store.Store { return open(t, now) }
}

// eachDurable runs test on SQLite and PostgreSQL.
func eachDurable(t *testing.T, test func(t *testing.T, open teststores.Opener)) {
	t.Helper()
	for _, s := range []struct {
		name string
		open teststores.Opener
	}{{"sqlite", teststores.SQLite}, {"postgres", teststores.Postgres}} {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			test(t, s.open)
		})
	}
}
