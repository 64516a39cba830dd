package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/agent/scripted"
	"github.com/countersign/countersign/server"
	"github.com/countersign/countersign/server/auth"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/web"
)

// Keys of the tests, like the demo's: alice's agent asks, bob and carol
// (finance) approve, olga operates, eve belongs to another tenant.
var keys = []auth.APIKey{
	{Key: "key_alice", Tenant: "acme", Actor: "alice", Roles: []string{"agent"}},
	{Key: "key_bob", Tenant: "acme", Actor: "bob", Roles: []string{"finance"}},
	{Key: "key_carol", Tenant: "acme", Actor: "carol", Roles: []string{"finance"}},
	{Key: "key_olga", Tenant: "acme", Actor: "olga", Roles: []string{"operator"}},
	{Key: "key_eve", Tenant: "globex", Actor: "eve", Roles: []string{"finance", "operator"}},
}

type emailInput struct {
	To      string `json:"to" jsonschema:"recipient"`
	Subject string `json:"subject" jsonschema:"subject line"`
	Body    string `json:"body" jsonschema:"the message, several lines"`
}

type refundInput struct {
	Amount   float64 `json:"amount" jsonschema:"amount in EUR"`
	Customer string  `json:"customer" jsonschema:"customer id"`
}

// harness is the real server (API and inbox) on an httptest server, with a
// running worker. Refunds for customer "c_gate" wait for release.
type harness struct {
	t      *testing.T
	url    string
	engine *countersign.Engine
	// worker runs beside the server; sweep runs its sweeping jobs now.
	worker  *countersign.Worker
	release chan struct{}
	once    sync.Once

	holdMu sync.Mutex
	hold   chan struct{} // while set, the inbox's event streams wait to open
}

// HoldStreams makes the inbox's event streams wait, unanswered, until
// ReleaseStreams: a page whose stream opens late.
func (h *harness) HoldStreams() {
	h.holdMu.Lock()
	defer h.holdMu.Unlock()
	h.hold = make(chan struct{})
}

// ReleaseStreams lets the held event streams open.
func (h *harness) ReleaseStreams() {
	h.holdMu.Lock()
	defer h.holdMu.Unlock()
	if h.hold != nil {
		close(h.hold)
		h.hold = nil
	}
}

// holding delays the inbox's event streams while HoldStreams holds them.
func (h *harness) holding(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.holdMu.Lock()
		hold := h.hold
		h.holdMu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// testClock is a clock that moves only when told, so that a test reaches a
// deadline without waiting for it.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

// Now is the clock's time.
func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on by d.
func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newHarness(t *testing.T) *harness { return newHarnessWith(t, nil) }

// newHarnessWith is newHarness whose engine, store and inbox read clock
// (nil: the real time).
func newHarnessWith(t *testing.T, clock *testClock) *harness {
	t.Helper()
	now := time.Now
	if clock != nil {
		now = clock.Now
	}
	h := &harness{t: t, release: make(chan struct{})}
	refund, err := countersign.NewAction(countersign.ActionSpec[refundInput]{
		Name: "payments.refund", Description: "Refund a payment",
		Confirmation:   countersign.Confirmation{Title: "Refund {amount} EUR to {customer}", Verb: "Refund"},
		ReplacementKey: "{customer}",
		Execute: func(ctx context.Context, req *countersign.ExecuteRequest, in refundInput) (*countersign.Receipt, error) {
			if in.Customer == "c_gate" {
				select {
				case <-h.release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return &countersign.Receipt{ID: "rf_" + in.Customer, Result: json.RawMessage(fmt.Sprintf(`{"refunded":%g}`, in.Amount))}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// credits.grant is remembered for any input.
	credit, err := countersign.NewAction(countersign.ActionSpec[refundInput]{
		Name: "credits.grant", Confirmation: countersign.Confirmation{Title: "Credit {amount} EUR to {customer}"},
		Execute: func(_ context.Context, _ *countersign.ExecuteRequest, in refundInput) (*countersign.Receipt, error) {
			return &countersign.Receipt{ID: "cr_" + in.Customer}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// flaky.write fails uncertainly, without Reconcile: it ends unknown.
	flaky, err := countersign.NewAction(countersign.ActionSpec[refundInput]{
		Name: "flaky.write",
		Execute: func(context.Context, *countersign.ExecuteRequest, refundInput) (*countersign.Receipt, error) {
			return nil, errors.New("connection reset")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// unsure.write fails uncertainly, and its Reconcile never knows: it
	// stays reconciling, asked again and again.
	unsure, err := countersign.NewAction(countersign.ActionSpec[refundInput]{
		Name: "unsure.write",
		Execute: func(context.Context, *countersign.ExecuteRequest, refundInput) (*countersign.Receipt, error) {
			return nil, errors.New("connection reset")
		},
		Reconcile: func(context.Context, *countersign.ReconcileRequest) (*countersign.Reconciliation, error) {
			return &countersign.Reconciliation{Status: countersign.ReconcileUnknown}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// email.send writes to a customer; the mail agent below calls it.
	email, err := countersign.NewAction(countersign.ActionSpec[emailInput]{
		Name: "email.send", Description: "Send an email to a customer",
		Confirmation: countersign.Confirmation{Title: "Email {to}: {subject}", Verb: "Send"},
		Execute: func(_ context.Context, _ *countersign.ExecuteRequest, in emailInput) (*countersign.Receipt, error) {
			return &countersign.Receipt{ID: "em_" + in.To}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	policy := &countersign.Policy{Rules: []countersign.Rule{{
		Match: "email.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"},
		Mode: countersign.ModeIndependent,
	}, {
		Match: "unsure.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"},
		Mode: countersign.ModeIndependent,
	}, {
		Match: "credits.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"},
		Mode: countersign.ModeIndependent, Remember: []countersign.Scope{countersign.ScopeThread}, GrantAnyInput: true,
	}, {
		Match: "flaky.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance", "role:operator"},
		Mode: countersign.ModeIndependent,
	}, {
		Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"},
		ForbidSelfApproval: true, Mode: countersign.ModeIndependent,
		Remember: []countersign.Scope{countersign.ScopeThread},
	}, {
		// Refunds over 100,000 EUR need two finance approvers.
		Match: "payments.refund", When: "input.amount > 100000", Effect: countersign.EffectAsk,
		Approvers: []string{"role:finance"}, Quorum: 2, ForbidSelfApproval: true, Mode: countersign.ModeIndependent,
	}}}
	engine, err := countersign.New(countersign.Options{Logger: slog.New(slog.DiscardHandler), Now: now,
		Store: memstore.New(&memstore.Options{Now: now}), Policy: policy, Actions: []*countersign.Action{refund, credit, flaky, unsure, email},
		ReconcileBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	authn, err := auth.NewAPIKeys(keys)
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	// The mail agent (a scripted model) sends the emails it is told to:
	// "tell TO about SUBJECT:" and the body on the lines below. A message
	// that names no agent is stored for an external one.
	model, err := scripted.New(scripted.Config{Rules: []scripted.Rule{
		{Match: `(?s)^tell (?P<to>\w+) about (?P<subject>[^:\n]+):\n(?P<body>.+)$`, Say: "I'll send that email.",
			Call: &scripted.Call{Action: "email.send", Input: `{"to": "{to}", "subject": "{subject}", "body": "{body}"}`}},
		{Match: `.*`, Say: "I send emails."},
	}})
	if err != nil {
		t.Fatal(err)
	}
	runtime, err := agent.NewRuntime(agent.RuntimeOptions{Engine: engine, Agents: []*agent.Agent{{Name: "mail", Model: model}}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	api, err := server.New(server.Options{Engine: engine, Auth: authn, Logger: quiet, Agents: runtime})
	if err != nil {
		t.Fatal(err)
	}
	inbox, err := web.New(web.Options{Engine: engine, Auth: authn, API: api, Logger: quiet, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	wopts := countersign.WorkerOptions{PollInterval: 50 * time.Millisecond, LeaseDuration: 5 * time.Second}
	if clock != nil {
		// A test that moves the clock sweeps when it means to.
		wopts.SweepInterval = time.Hour
	}
	w, err := engine.NewWorker(wopts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	// One listener, as countersign serve mounts it: the API's paths, and
	// the inbox at /.
	mux := http.NewServeMux()
	mux.Handle("/v1/", api.Handler())
	mux.Handle("/healthz", api.Handler())
	mux.Handle("/", inbox.Handler())
	mux.Handle("GET /events", h.holding(inbox.Handler()))
	hs := httptest.NewUnstartedServer(mux)
	hs.Config = api.HTTPServer("")
	hs.Config.Handler = mux
	hs.Start()
	h.url = hs.URL
	h.engine = engine
	h.worker = w
	t.Cleanup(func() {
		h.Release()
		h.ReleaseStreams()
		// Shutdown ends the open event streams.
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Config.Shutdown(sctx)
		hs.Close()
		stop()
		<-done
	})
	return h
}

// sweep runs one batch of each of the worker's sweeping jobs (expiry,
// escalations, reminders, expired sessions) now: a test that moves the
// clock sweeps when it means to.
func (h *harness) sweep() (countersign.SweepCounts, error) {
	return h.worker.SweepOnce(context.Background())
}

// Release lets gated refunds finish.
func (h *harness) Release() { h.once.Do(func() { close(h.release) }) }

// propose asks for a refund as alice's agent, through the API, and returns
// the proposal id.
func (h *harness) propose(thread, customer string, amount float64) string {
	h.t.Helper()
	return h.call("payments.refund", thread, customer, amount)
}

// call asks for action with a refund-shaped input, as alice's agent.
func (h *harness) call(action, thread, customer string, amount float64) string {
	h.t.Helper()
	return h.agentCall(action, thread, customer, amount, "").ProposalID
}

// callAnswer is what the tests read of a call's answer.
type callAnswer struct {
	ProposalID     string `json:"proposal_id"`
	Status         string `json:"status"`
	ConfirmationID string `json:"confirmation_id"`
	Receipt        string `json:"receipt"`
	Proposal       *struct {
		ID string `json:"id"`
	} `json:"proposal"`
}

// agentCall makes alice's agent's call of action, the tool call id named
// for the customer, with extra fields (`,"mode":"wait"`) added to the body.
// A wait never blocks: wait_seconds is 0 unless extra sets it.
func (h *harness) agentCall(action, thread, customer string, amount float64, extra string) *callAnswer {
	h.t.Helper()
	body := fmt.Sprintf(`{"thread_id":%q,"tool_call_id":"call_%s","action":%q,"input":{"amount":%g,"customer":%q}%s}`,
		thread, customer, action, amount, customer, extra)
	if !strings.Contains(extra, "wait_seconds") {
		body = strings.TrimSuffix(body, "}") + `,"wait_seconds":0}`
	}
	req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/calls", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer key_alice")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out callAnswer
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		h.t.Fatalf("call %s: status %d: %v", action, resp.StatusCode, err)
	}
	if out.ProposalID == "" && out.Proposal != nil {
		out.ProposalID = out.Proposal.ID
	}
	if resp.StatusCode != http.StatusOK || out.ProposalID == "" {
		h.t.Fatalf("call %s: status %d, %+v", action, resp.StatusCode, out)
	}
	return &out
}

// say posts alice's message to thread through the API, for the mail agent
// when withAgent (its run is driven before the answer comes), and returns
// the ids of the proposals the run made.
func (h *harness) say(thread, text string, withAgent bool) []string {
	h.t.Helper()
	msg := map[string]any{"text": text}
	if withAgent {
		msg["agent"] = "mail"
	}
	body, _ := json.Marshal(msg)
	req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/threads/"+url.PathEscape(thread)+"/messages", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer key_alice")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Run *struct {
			Status      string   `json:"status"`
			ProposalIDs []string `json:"proposal_ids"`
		} `json:"run"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode/100 != 2 {
		h.t.Fatalf("post %q: status %d: %v", text, resp.StatusCode, err)
	}
	if !withAgent {
		return nil
	}
	if out.Run == nil || out.Run.Status != "finished" {
		h.t.Fatalf("post %q: the run %+v, want finished", text, out.Run)
	}
	return out.Run.ProposalIDs
}

// client is a browser-like HTTP client with a cookie jar that never
// follows redirects.
type client struct {
	t    *testing.T
	base string
	http *http.Client
}

func (h *harness) client() *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: h.t, base: h.url, http: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (c *client) get(path string) (*http.Response, string) {
	c.t.Helper()
	resp, err := c.http.Get(c.base + path)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (c *client) post(path string, form url.Values, header http.Header) (*http.Response, string) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// csrf returns the CSRF token of the page at path.
func (c *client) csrf(path string) string {
	c.t.Helper()
	_, body := c.get(path)
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		c.t.Fatalf("no csrf field on %s:\n%s", path, body)
	}
	return m[1]
}

// signIn signs in with key through the form.
func (c *client) signIn(key string) {
	c.t.Helper()
	tok := c.csrf("/login")
	resp, body := c.post("/login", url.Values{"csrf": {tok}, "token": {key}, "next": {"/"}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		c.t.Fatalf("sign in: %d %s\n%s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
}
