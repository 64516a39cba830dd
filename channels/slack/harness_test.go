package slack_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/channels/slack"
	"github.com/countersign/countersign/channels/slack/slacktest"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/testlog"
	"github.com/countersign/countersign/internal/teststores"
	"github.com/countersign/countersign/notifications"
	"github.com/countersign/countersign/server"
)

const (
	botToken  = "xoxb-test-token"
	teamID    = "T0ACME"
	appID     = "A0COUNTER"
	publicURL = "https://countersign.acme.example"
)

var signingSecret = []byte("slack-signing-secret")

// The mapped people: alice requests (and holds the finance role, so that
// only the requester rule keeps her buttons away), bob and carol approve,
// dave is mapped but holds no role any rule accepts.
var users = map[string]slack.User{
	"alice": {SlackID: "U0ALICE", Roles: []string{"finance"}},
	"bob":   {SlackID: "U0BOB", Roles: []string{"finance"}},
	"carol": {SlackID: "U0CAROL", Roles: []string{"finance"}},
	"dave":  {SlackID: "U0DAVE"},
}

var alice = countersign.Identity{Tenant: "acme", Actor: "alice", Roles: []string{"finance"}, Kind: countersign.KindAgent}

type refundInput struct {
	Amount   float64 `json:"amount"`
	Customer string  `json:"customer"`
	Note     string  `json:"note,omitempty"`
}

// harness is one test's engine, store, fake Slack, channel and running
// worker (executions, sweeps, and the outbox's deliveries).
type harness struct {
	t       *testing.T
	engine  *countersign.Engine
	fake    *slacktest.Server
	channel *slack.Slack
	// route serves POST /v1/slack/interactions as serve mounts it.
	route *httptest.Server
	calls atomic.Int64
	// log holds the warnings of the engine, the channel, the outbox and
	// the worker (a failed delivery attempt, say): a test that times out
	// waiting for a message prints them.
	log testlog.Buffer
}

type setup struct {
	quorum int
	post   string
	stepUp string
	ttl    time.Duration
}

func newHarness(t *testing.T, open teststores.Opener, s setup) *harness {
	t.Helper()
	st := open(t, time.Now)
	h := &harness{t: t, fake: slacktest.NewServer(t, botToken)}
	logger := slog.New(slog.NewTextHandler(&h.log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := countersign.NewAction(countersign.ActionSpec[refundInput]{
		Name:         "payments.refund",
		Confirmation: countersign.Confirmation{Title: "Refund a customer", Verb: "refund"},
		Execute: func(_ context.Context, _ *countersign.ExecuteRequest, in refundInput) (*countersign.Receipt, error) {
			return &countersign.Receipt{ID: "rf_" + in.Customer}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.engine, err = countersign.New(countersign.Options{
		Store: st, Actions: []*countersign.Action{a}, Logger: logger,
		Policy: &countersign.Policy{Rules: []countersign.Rule{{
			Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}, Quorum: max(s.quorum, 1),
			Mode: countersign.ModeIndependent, Notify: []string{"slack"}, StepUp: s.stepUp, TTL: s.ttl,
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.channel, err = slack.New(slack.Options{
		Engine: h.engine, Tenant: "acme", TeamID: teamID, AppID: appID, BotToken: botToken, SigningSecret: signingSecret,
		APIURL: h.fake.APIURL(), Users: users, Post: s.post, PublicURL: publicURL,
		PostLease: 200 * time.Millisecond, Backoff: notifications.Backoff{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond},
		Logger: logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	d, err := notifications.New(notifications.Options{Engine: h.engine, Render: server.RenderProposal,
		Channels: []notifications.Channel{h.channel.Channel()}, PollInterval: 10 * time.Millisecond,
		Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	w, err := h.engine.NewWorker(countersign.WorkerOptions{PollInterval: 20 * time.Millisecond, Notifications: d})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	mux := http.NewServeMux()
	mux.Handle("POST /v1/slack/interactions", h.channel.Handler())
	h.route = httptest.NewServer(mux)
	t.Cleanup(h.route.Close)
	return h
}

// propose makes alice's agent call payments.refund and returns the
// pending proposal.
func (h *harness) propose(input string) *cstype.Proposal {
	h.t.Helper()
	n := h.calls.Add(1)
	res, err := h.engine.Call(h.t.Context(), &countersign.Call{Identity: alice, ThreadID: "t1",
		ToolCallID: fmt.Sprintf("call_%d", n), Action: "payments.refund", Input: []byte(input)})
	if err != nil {
		h.t.Fatal(err)
	}
	if res.Proposal == nil || res.Proposal.Status != cstype.StatusPending {
		h.t.Fatalf("call: %+v; want a pending proposal", res)
	}
	return res.Proposal
}

// proposal reads p as bob sees it.
func (h *harness) proposal(id string) *cstype.Proposal {
	h.t.Helper()
	p, err := h.engine.Proposal(h.t.Context(), countersign.Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance"}}, id)
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// eventually polls cond until it holds, failing after a deadline.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting until %s\nwarnings logged:\n%s", what, h.log.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// dm waits for the one direct message to user and returns it as it stands
// once cond holds of it.
func (h *harness) dm(user string, cond func(slacktest.Message) bool) slacktest.Message {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		msgs := h.fake.Sent(user)
		if len(msgs) > 1 {
			h.t.Fatalf("%d messages to %s, want one", len(msgs), user)
		}
		if len(msgs) == 1 && cond(msgs[0]) {
			return msgs[0]
		}
		if time.Now().After(deadline) {
			// What it shows instead, so that a failure says which update
			// is missing.
			shown := "no message"
			if len(msgs) == 1 {
				shown = fmt.Sprintf("live %v:\n%s", live(msgs[0]), msgs[0].Shown())
			}
			h.t.Fatalf("timed out waiting until the message to %s shows what the test waits for; it shows %s\nwarnings logged:\n%s", user, shown, h.log.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func anyState(slacktest.Message) bool { return true }

// live reports whether a message has a decision button.
func live(m slacktest.Message) bool {
	b := m.Buttons()
	_, approve := b["countersign_approve"]
	_, reject := b["countersign_reject"]
	return approve || reject
}

// send posts body to the interactions route with headers and returns the
// status and the answer's body.
func (h *harness) send(body string, hdr http.Header) (int, string) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.route.URL+"/v1/slack/interactions", strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header = hdr
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// click is user clicking button, signed and in time, and returns the
// ephemeral replies the click got (its response_url is named reply).
func (h *harness) click(user string, button slacktest.Element, reply string) []slacktest.Reply {
	h.t.Helper()
	body := slacktest.FormBody(slacktest.Payload(teamID, appID, user, h.fake.ResponseURL(reply), button))
	if status, answer := h.send(body, slacktest.Sign(body, time.Now(), signingSecret)); status != http.StatusOK {
		h.t.Fatalf("click by %s: %d %s, want 200", user, status, answer)
	}
	return h.fake.RepliesTo(reply)
}

// onlyReply requires exactly one ephemeral reply, containing want.
func onlyReply(t *testing.T, replies []slacktest.Reply, want string) {
	t.Helper()
	if len(replies) != 1 || replies[0].ResponseType != "ephemeral" || replies[0].ReplaceOriginal || !strings.Contains(replies[0].Text, want) {
		t.Fatalf("replies %+v; want one ephemeral reply saying %q", replies, want)
	}
}
