package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/webhook"
)

// answer is one scripted response.
type answer struct {
	status int
	body   string
}

// fakeBackend is the user's system of record behind three endpoints. It
// refuses any request whose signature does not verify, and answers each
// endpoint from its script (the last answer repeats).
type fakeBackend struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	scripts map[string][]answer
	bodies  map[string][]map[string]any
	keys    []string // Idempotency-Key of each execute
}

func newFakeBackend(t *testing.T, scripts map[string][]answer) *fakeBackend {
	t.Helper()
	b := &fakeBackend{t: t, scripts: scripts, bodies: map[string][]map[string]any{}}
	b.srv = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *fakeBackend) serve(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil {
		err = webhook.Verify(testSecret, r.Header.Get(webhook.SignatureHeader), raw, time.Now(), 0)
	}
	if err != nil {
		b.t.Errorf("%s: %v", r.URL.Path, err)
		http.Error(w, `{"reason":"bad signature"}`, http.StatusUnauthorized)
		return
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		b.t.Errorf("%s: %v", r.URL.Path, err)
	}
	b.mu.Lock()
	b.bodies[r.URL.Path] = append(b.bodies[r.URL.Path], body)
	if r.URL.Path == "/execute" {
		b.keys = append(b.keys, r.Header.Get("Idempotency-Key"))
	}
	script := b.scripts[r.URL.Path]
	var a answer
	if len(script) > 0 {
		a = script[0]
		if len(script) > 1 {
			b.scripts[r.URL.Path] = script[1:]
		}
	}
	b.mu.Unlock()
	if a.status == 0 {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	io.WriteString(w, a.body)
}

func (b *fakeBackend) received(path string) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]map[string]any(nil), b.bodies[path]...)
}

var (
	alice = countersign.Identity{Tenant: "acme", Actor: "alice", Roles: []string{"agent"}}
	bob   = countersign.Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance"}}
)

// refund is the webhook action under test, with every endpoint on b.
func refund(t *testing.T, b *fakeBackend, idempotent bool) *countersign.Action {
	t.Helper()
	a, err := webhook.NewAction(webhook.Spec{
		Name: "payments.refund", Version: "2", Kind: "write", Description: "Refund a payment",
		InputSchema: json.RawMessage(`{"type":"object","required":["amount","customer"],"additionalProperties":false,
			"properties":{"amount":{"type":"number","exclusiveMinimum":0},"customer":{"type":"string"}}}`),
		Confirmation:   countersign.Confirmation{Title: "Refund {amount} to {customer}", Verb: "Refund"},
		ReplacementKey: "{customer}",
		Idempotent:     idempotent,
		Prepare:        &webhook.Endpoint{URL: b.srv.URL + "/prepare", Timeout: 2 * time.Second},
		Execute:        &webhook.Endpoint{URL: b.srv.URL + "/execute", Timeout: 2 * time.Second},
		Reconcile:      &webhook.Endpoint{URL: b.srv.URL + "/reconcile", Timeout: 2 * time.Second},
	}, webhook.Options{Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// testEngine is an engine and the store it was made with, which tests read
// to check what was stored (the engine does not hand its store out).
type testEngine struct {
	*countersign.Engine
	store store.Store
}

func newEngine(t *testing.T, a *countersign.Action) *testEngine {
	t.Helper()
	st := memstore.New(nil)
	e, err := countersign.New(countersign.Options{
		Store: st, Actions: []*countersign.Action{a},
		Policy: &countersign.Policy{Rules: []countersign.Rule{{
			Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"},
		}}},
		RetryBackoff: time.Millisecond, ReconcileBackoff: time.Millisecond, WaitPoll: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &testEngine{Engine: e, store: st}
}

func refundCall(tool string) *countersign.Call {
	return &countersign.Call{
		Identity: alice, ThreadID: "t1", RunID: "r1", ToolCallID: tool, Action: "payments.refund",
		Input: json.RawMessage(`{"amount":40,"customer":"c_9"}`), Mode: countersign.ModeWait, WaitTimeout: 10 * time.Second,
	}
}

// awaitPending returns the proposal of a call once it is stored.
func awaitPending(t *testing.T, e *testEngine, tool string) *cstype.Proposal {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		p, err := e.store.GetProposalByToolCall(context.Background(), &store.GetProposalByToolCallParams{Tenant: "acme", ThreadID: "t1", ToolCallID: tool})
		if err == nil {
			return p
		}
	}
	t.Fatalf("call %s never proposed", tool)
	return nil
}

// callApproved makes a wait-mode call, and approves its proposal (as bob)
// while the call waits.
func callApproved(t *testing.T, e *testEngine, tool string) (*countersign.Result, *cstype.Proposal) {
	t.Helper()
	type ret struct {
		res *countersign.Result
		err error
	}
	done := make(chan ret, 1)
	go func() {
		res, err := e.Call(context.Background(), refundCall(tool))
		done <- ret{res, err}
	}()
	p := awaitPending(t, e, tool)
	if p.Status != cstype.StatusPending {
		t.Fatalf("proposal is %s, want pending", p.Status)
	}
	d, err := e.Decide(context.Background(), &countersign.Decision{Identity: bob, ProposalID: p.ID, Verdict: countersign.Approve})
	if err != nil || d.Status != countersign.DecideApplied {
		t.Fatalf("Decide = %+v, %v", d, err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("Call: %v", r.err)
	}
	return r.res, p
}

func TestEngineWaitModeApprovedAndExecuted(t *testing.T) {
	t.Parallel()
	b := newFakeBackend(t, map[string][]answer{
		"/prepare": {{200, `{"preview":"Refund 40 EUR to c_9 (order o_1)","state_version":"sv_7"}`}},
		"/execute": {{201, `{"receipt":"rf_123","result":{"refunded":40}}`}},
	})
	e := newEngine(t, refund(t, b, false))
	res, pending := callApproved(t, e, "call_1")
	if pending.Preview != "Refund 40 EUR to c_9 (order o_1)" || pending.StateVersion != "sv_7" {
		t.Fatalf("proposal preview %q, state version %q: want the backend's", pending.Preview, pending.StateVersion)
	}
	if res.Status != countersign.ResultSucceeded || res.Receipt != "rf_123" || string(res.Result) != `{"refunded":40}` || res.Executed == nil || !*res.Executed {
		t.Fatalf("result = %+v", res)
	}
	prep := b.received("/prepare")
	if len(prep) != 1 || prep[0]["actor"] != "alice" || prep[0]["tenant"] != "acme" || prep[0]["action_version"] != "2" {
		t.Fatalf("prepare bodies = %v", prep)
	}
	exec := b.received("/execute")
	if len(exec) != 1 {
		t.Fatalf("executes = %v", exec)
	}
	x := exec[0]
	// The action runs as its requester, whoever approved it.
	if x["operation_id"] != pending.OperationID || x["proposal_id"] != pending.ID || x["state_version"] != "sv_7" ||
		x["actor"] != "alice" || x["tenant"] != "acme" || x["attempt"] != 1.0 || x["action"] != "payments.refund" {
		t.Fatalf("execute body = %v (proposal %s, operation %s)", x, pending.ID, pending.OperationID)
	}
	if b.keys[0] != pending.OperationID {
		t.Fatalf("Idempotency-Key = %q, want %q", b.keys[0], pending.OperationID)
	}
}

func TestEngineUncertainExecuteIsReconciled(t *testing.T) {
	t.Parallel()
	b := newFakeBackend(t, map[string][]answer{
		"/prepare": {{200, `{"preview":"Refund 40 EUR to c_9","state_version":"sv_7"}`}},
		// The backend applies the refund, but the answer is lost behind a
		// failing gateway.
		"/execute": {{502, `{"error":"upstream timed out"}`}},
		"/reconcile": {
			{200, `{"status":"unknown"}`},
			{200, `{"status":"applied","receipt":"rf_123","result":{"refunded":40}}`},
		},
	})
	e := newEngine(t, refund(t, b, false))
	res, pending := callApproved(t, e, "call_1")
	if res.Status != countersign.ResultReconciling || res.Executed != nil {
		t.Fatalf("result = %+v, want reconciling", res)
	}
	w, err := e.NewWorker(countersign.WorkerOptions{PollInterval: 10 * time.Millisecond, LeaseDuration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var p *cstype.Proposal
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if _, err := w.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		if p, err = e.Proposal(context.Background(), alice, pending.ID); err != nil {
			t.Fatal(err)
		}
		if p.Status != cstype.StatusReconciling || time.Now().After(deadline) {
			break
		}
	}
	if p.Status != cstype.StatusSucceeded || p.Outcome.Receipt != "rf_123" || string(p.Outcome.Result) != `{"refunded":40}` {
		t.Fatalf("proposal %s, outcome %+v: want succeeded with the reconciled receipt", p.Status, p.Outcome)
	}
	if n := len(b.received("/execute")); n != 1 {
		t.Fatalf("%d executes: an uncertain non-idempotent execute must never be re-sent", n)
	}
	rec := b.received("/reconcile")
	if len(rec) != 2 {
		t.Fatalf("%d reconciles, want 2", len(rec))
	}
	for _, r := range rec {
		if r["operation_id"] != pending.OperationID || r["proposal_id"] != pending.ID || r["actor"] != "alice" || r["action"] != "payments.refund" {
			t.Fatalf("reconcile body = %v", r)
		}
	}
	// A repeat of the call reads the recorded outcome; nothing runs again.
	again, err := e.Call(context.Background(), refundCall("call_1"))
	if err != nil || again.Status != countersign.ResultSucceeded || again.Receipt != "rf_123" || len(b.received("/execute")) != 1 {
		t.Fatalf("repeat = %+v, %v", again, err)
	}
}

func TestEngineIdempotentRetryCarriesTheAttempt(t *testing.T) {
	t.Parallel()
	b := newFakeBackend(t, map[string][]answer{
		"/prepare": {{200, `{"preview":"Refund","state_version":"sv_7"}`}},
		"/execute": {{500, `{}`}, {503, `{}`}, {200, `{"receipt":"rf_1"}`}},
	})
	// Without a reconcile endpoint, an idempotent action is retried.
	a, err := webhook.NewAction(webhook.Spec{
		Name: "payments.refund", Idempotent: true,
		Prepare: &webhook.Endpoint{URL: b.srv.URL + "/prepare"},
		Execute: &webhook.Endpoint{URL: b.srv.URL + "/execute"},
	}, webhook.Options{Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, a)
	res, pending := callApproved(t, e, "call_1")
	if res.Status != countersign.ResultSucceeded || res.Receipt != "rf_1" {
		t.Fatalf("result = %+v", res)
	}
	exec := b.received("/execute")
	if len(exec) != 3 {
		t.Fatalf("%d executes, want 3", len(exec))
	}
	for i, x := range exec {
		if x["attempt"] != float64(i+1) || x["operation_id"] != pending.OperationID || b.keys[i] != pending.OperationID || x["action_version"] != "1" {
			t.Fatalf("execute %d = %v (key %s)", i+1, x, b.keys[i])
		}
	}
}

func TestEngineOutcomes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		execute answer
		want    countersign.ResultStatus
	}{
		{name: "4xx fails, not applied", execute: answer{409, `{"reason":"state_version changed"}`}, want: countersign.ResultFailed},
		// No reconcile answer is scripted, so the proposal stays reconciling.
		{name: "5xx is uncertain", execute: answer{500, `{}`}, want: countersign.ResultReconciling},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newFakeBackend(t, map[string][]answer{
				"/prepare": {{200, `{"preview":"Refund","state_version":"sv_7"}`}},
				"/execute": {tc.execute},
			})
			e := newEngine(t, refund(t, b, false))
			res, _ := callApproved(t, e, "call_1")
			if res.Status != tc.want {
				t.Fatalf("result = %+v, want %s", res, tc.want)
			}
		})
	}
}

func TestEnginePrepareDenialPropagates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		code   string
	}{
		{403, countersign.DeniedByAuthorize},
		{409, countersign.DeniedByPreflight},
		{422, countersign.DeniedByPreflight},
	} {
		b := newFakeBackend(t, map[string][]answer{"/prepare": {{tc.status, `{"reason":"the order is already refunded"}`}}})
		e := newEngine(t, refund(t, b, false))
		c := refundCall("call_1")
		c.WaitTimeout = 20 * time.Millisecond
		res, err := e.Call(context.Background(), c)
		var d *countersign.DeniedError
		if !errors.As(err, &d) || !errors.Is(err, countersign.ErrDenied) || d.Code != tc.code || d.Reason != "the order is already refunded" {
			t.Fatalf("HTTP %d: Call = %+v, %v; want a %s denial with the backend's reason", tc.status, res, err, tc.code)
		}
		// Nothing was stored and nothing executed.
		if _, err := e.store.GetProposalByToolCall(context.Background(), &store.GetProposalByToolCallParams{Tenant: "acme", ThreadID: "t1", ToolCallID: "call_1"}); !errors.Is(err, cstype.ErrNotFound) {
			t.Fatalf("HTTP %d: a proposal was stored: %v", tc.status, err)
		}
		if len(b.received("/execute")) != 0 {
			t.Fatalf("HTTP %d: executed", tc.status)
		}
	}
}

func TestNewActionRejectsBadSpecs(t *testing.T) {
	t.Parallel()
	ok := &webhook.Endpoint{URL: "https://backend.example/execute"}
	cases := map[string]struct {
		spec webhook.Spec
		opts webhook.Options
	}{
		"no secret":         {spec: webhook.Spec{Name: "a", Execute: ok}},
		"no execute":        {spec: webhook.Spec{Name: "a"}, opts: webhook.Options{Secret: testSecret}},
		"empty url":         {spec: webhook.Spec{Name: "a", Execute: &webhook.Endpoint{}}},
		"relative url":      {spec: webhook.Spec{Name: "a", Execute: &webhook.Endpoint{URL: "/execute"}}},
		"no host":           {spec: webhook.Spec{Name: "a", Execute: &webhook.Endpoint{URL: "http:///execute"}}},
		"port only":         {spec: webhook.Spec{Name: "a", Execute: &webhook.Endpoint{URL: "http://:8080/execute"}}},
		"other scheme":      {spec: webhook.Spec{Name: "a", Execute: &webhook.Endpoint{URL: "ftp://backend.example/x"}}},
		"opaque":            {spec: webhook.Spec{Name: "a", Execute: &webhook.Endpoint{URL: "http:backend.example"}}},
		"userinfo":          {spec: webhook.Spec{Name: "a", Execute: &webhook.Endpoint{URL: "https://u:p@backend.example/x"}}},
		"fragment":          {spec: webhook.Spec{Name: "a", Execute: &webhook.Endpoint{URL: "https://backend.example/x#frag"}}},
		"unparsable":        {spec: webhook.Spec{Name: "a", Execute: &webhook.Endpoint{URL: "http://backend.example:port/x"}}},
		"negative timeout":  {spec: webhook.Spec{Name: "a", Execute: &webhook.Endpoint{URL: ok.URL, Timeout: -time.Second}}},
		"bad prepare url":   {spec: webhook.Spec{Name: "a", Execute: ok, Prepare: &webhook.Endpoint{URL: "file:///etc/passwd"}}},
		"bad reconcile url": {spec: webhook.Spec{Name: "a", Execute: ok, Reconcile: &webhook.Endpoint{URL: "backend.example"}}},
		"bad name":          {spec: webhook.Spec{Name: "a b", Execute: ok}},
		"bad kind":          {spec: webhook.Spec{Name: "a", Kind: "delete", Execute: ok}},
		"bad schema":        {spec: webhook.Spec{Name: "a", InputSchema: json.RawMessage(`{`), Execute: ok}},
	}
	for name, tc := range cases {
		if tc.opts.Secret == nil && name != "no secret" {
			tc.opts.Secret = testSecret
		}
		if _, err := webhook.NewAction(tc.spec, tc.opts); err == nil {
			t.Errorf("%s: NewAction succeeded, want an error", name)
		}
	}
	a, err := webhook.NewAction(webhook.Spec{Name: "payments.refund", Execute: ok}, webhook.Options{Secret: testSecret})
	if err != nil || a.Version() != "1" || a.Kind() != countersign.KindWrite || a.Idempotent() {
		t.Fatalf("NewAction = %v, %v: want the defaults", a, err)
	}
}
