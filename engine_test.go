package countersign_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/storetest"
)

// newClock returns the fake clock the engine and its store share.
func newClock() *storetest.Clock {
	return storetest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
}

// backend is a fake system of record. Its behaviour per call is scripted.
type backend struct {
	mu       sync.Mutex
	calls    map[string]int // executions per operation id
	attempts []int
	// next answers, consumed in order; empty means success.
	script []error
}

var (
	errUncertain = errors.New("connection reset after the request was sent")
	errHook      = errors.New("the notification service is down")
)

func newBackend() *backend { return &backend{calls: map[string]int{}} }

func (b *backend) execute(req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls[req.OperationID]++
	b.attempts = append(b.attempts, req.Attempt)
	if len(b.script) > 0 {
		err := b.script[0]
		b.script = b.script[1:]
		if err != nil {
			return nil, err
		}
	}
	return &countersign.Receipt{ID: "rc_" + req.OperationID, Result: json.RawMessage(`{"ok":true}`)}, nil
}

func (b *backend) total() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, c := range b.calls {
		n += c
	}
	return n
}

type harness struct {
	t       *testing.T
	clock   *storetest.Clock
	store   store.Store
	engine  *countersign.Engine
	backend *backend
	settled sync.Map // proposal id → *atomic.Int32
}

type harnessOpts struct {
	// open opens the store; default memstore.
	open       storeOpener
	rules      []countersign.Rule
	actions    func(b *backend) []*countersign.Action
	resolver   countersign.ActorResolver
	engineOpts func(*countersign.Options)
}

func refundSpec(b *backend) countersign.RawActionSpec {
	return countersign.RawActionSpec{
		Name:    "payments.refund",
		Version: "1",
		InputSchema: json.RawMessage(`{"type":"object","required":["amount","customer"],"additionalProperties":false,
			"properties":{"amount":{"type":"number","exclusiveMinimum":0},"customer":{"type":"string"}}}`),
		Confirmation:   countersign.Confirmation{Title: "Refund {amount} to {customer}", Verb: "Refund"},
		ReplacementKey: "{customer}",
		Hooks: countersign.Hooks{Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
			return b.execute(req)
		}},
	}
}

func mustAction(t testing.TB, spec countersign.RawActionSpec) *countersign.Action {
	t.Helper()
	a, err := countersign.NewRawAction(spec)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func newHarness(t *testing.T, o harnessOpts) *harness {
	t.Helper()
	h := &harness{t: t, clock: newClock(), backend: newBackend()}
	if o.open == nil {
		o.open = openMemory
	}
	h.store = o.open(t, h.clock.Now)
	actions := []*countersign.Action{mustAction(t, refundSpec(h.backend))}
	if o.actions != nil {
		actions = o.actions(h.backend)
	}
	rules := o.rules
	if rules == nil {
		rules = []countersign.Rule{{Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}}}
	}
	opts := countersign.Options{
		Store: h.store, Actions: actions, Policy: &countersign.Policy{Rules: rules},
		Now: h.clock.Now, ActorResolver: o.resolver, RetryBackoff: time.Millisecond, WaitPoll: 5 * time.Millisecond,
		OnSettled: []countersign.SettledFunc{func(ctx context.Context, p *cstype.Proposal) error {
			v, _ := h.settled.LoadOrStore(p.ID, new(atomic.Int32))
			v.(*atomic.Int32).Add(1)
			return errHook // logged, and never retried or fatal
		}},
	}
	if o.engineOpts != nil {
		o.engineOpts(&opts)
	}
	e, err := countersign.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	h.engine = e
	return h
}

func (h *harness) settledCount(id string) int32 {
	v, ok := h.settled.Load(id)
	if !ok {
		return 0
	}
	return v.(*atomic.Int32).Load()
}

var (
	tAlice = countersign.Identity{Tenant: "acme", Actor: "alice", Roles: []string{"agent"}}
	tBob   = countersign.Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance", "operator"}}
	tCarol = countersign.Identity{Tenant: "acme", Actor: "carol", Roles: []string{"finance"}}
	tDave  = countersign.Identity{Tenant: "acme", Actor: "dave"}
	tEve   = countersign.Identity{Tenant: "other", Actor: "eve", Roles: []string{"finance"}}
)

func refundCall(tool string, mode countersign.Mode, input string) *countersign.Call {
	return &countersign.Call{
		Identity: tAlice, ThreadID: "t1", RunID: "r1", ToolCallID: tool, Action: "payments.refund",
		Input: json.RawMessage(input), Mode: mode, WaitTimeout: 20 * time.Millisecond,
	}
}

func (h *harness) call(c *countersign.Call) *countersign.Result {
	h.t.Helper()
	res, err := h.engine.Call(context.Background(), c)
	if err != nil {
		h.t.Fatalf("Call(%s): %v", c.ToolCallID, err)
	}
	return res
}

func (h *harness) decide(who countersign.Identity, id string, v countersign.Verdict) *countersign.DecideResult {
	h.t.Helper()
	res, err := h.engine.Decide(context.Background(), &countersign.Decision{Identity: who, ProposalID: id, Verdict: v})
	if err != nil {
		h.t.Fatalf("Decide(%s, %s): %v", who.Actor, v, err)
	}
	return res
}

func TestTypedActionInfersSchemaAndListsEveryFailingPath(t *testing.T) {
	t.Parallel()
	type in struct {
		Amount   float64 `json:"amount"`
		Customer string  `json:"customer"`
		Note     string  `json:"note,omitempty"`
	}
	a, err := countersign.NewAction(countersign.ActionSpec[in]{
		Name: "payments.refund",
		Execute: func(ctx context.Context, req *countersign.ExecuteRequest, v in) (*countersign.Receipt, error) {
			return &countersign.Receipt{ID: v.Customer}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Type                 string         `json:"type"`
		Required             []string       `json:"required"`
		Properties           map[string]any `json:"properties"`
		AdditionalProperties any            `json:"additionalProperties"`
	}
	if err := json.Unmarshal(a.InputSchema(), &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Type != "object" || strings.Join(schema.Required, ",") != "amount,customer" || len(schema.Properties) != 3 {
		t.Fatalf("inferred schema = %s", a.InputSchema())
	}
	e, err := countersign.New(countersign.Options{Store: memstore.New(nil), Actions: []*countersign.Action{a},
		Policy: &countersign.Policy{Rules: []countersign.Rule{{Match: "payments.refund", Effect: countersign.EffectAllow}}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Call(context.Background(), &countersign.Call{Identity: tAlice, ThreadID: "t", ToolCallID: "c",
		Action: "payments.refund", Input: json.RawMessage(`{"amount":"forty","extra":1}`)})
	var inv *countersign.InvalidInputError
	if !errors.As(err, &inv) || !errors.Is(err, countersign.ErrInvalidInput) {
		t.Fatalf("err = %v, want *InvalidInputError", err)
	}
	paths := map[string]bool{}
	for _, p := range inv.Problems {
		paths[p.Path] = true
	}
	// The wrong type, the missing field and the unknown field are all listed.
	if !paths["/amount"] || !paths[""] || len(inv.Problems) < 3 {
		t.Fatalf("problems = %+v, want /amount, a missing customer and an unknown extra", inv.Problems)
	}
	res, err := e.Call(context.Background(), &countersign.Call{Identity: tAlice, ThreadID: "t", ToolCallID: "c2",
		Action: "payments.refund", Input: json.RawMessage(`{"amount":40,"customer":"c_9"}`)})
	// An allowed write leaves its record.
	if err != nil || res.Status != countersign.ResultSucceeded || res.Receipt != "c_9" || res.Proposal == nil || res.Proposal.Status != cstype.StatusSucceeded {
		t.Fatalf("allowed call = %+v, %v", res, err)
	}
}

func TestNewActionRejectsBadSpecs(t *testing.T) {
	t.Parallel()
	exec := countersign.Hooks{Execute: func(context.Context, *countersign.ExecuteRequest) (*countersign.Receipt, error) { return nil, nil }}
	for name, spec := range map[string]countersign.RawActionSpec{
		"empty name":      {Hooks: exec},
		"bad name":        {Name: "a b", Hooks: exec},
		"no execute":      {Name: "a"},
		"bad kind":        {Name: "a", Kind: "delete", Hooks: exec},
		"bad schema":      {Name: "a", InputSchema: json.RawMessage(`{"type":"nonsense"}`), Hooks: exec},
		"schema not JSON": {Name: "a", InputSchema: json.RawMessage(`{`), Hooks: exec},
		"external ref":    {Name: "a", InputSchema: json.RawMessage(`{"$ref":"http://example.com/s.json"}`), Hooks: exec},
		"bad placeholder": {Name: "a", Confirmation: countersign.Confirmation{Title: "Refund {amount"}, Hooks: exec},
		"bad replace key": {Name: "a", ReplacementKey: "{a b}", Hooks: exec},
	} {
		if _, err := countersign.NewRawAction(spec); err == nil {
			t.Errorf("%s: NewRawAction succeeded, want an error", name)
		}
	}
}

func TestPolicyRuleSpecificityAndDefaults(t *testing.T) {
	t.Parallel()
	b := newBackend()
	mk := func(name string, kind countersign.Kind) *countersign.Action {
		return mustAction(t, countersign.RawActionSpec{Name: name, Kind: kind, Hooks: countersign.Hooks{
			Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
				return b.execute(req)
			},
		}})
	}
	e, err := countersign.New(countersign.Options{
		Store: memstore.New(nil),
		Actions: []*countersign.Action{
			mk("payments.refund", countersign.KindWrite), mk("payments.refund.partial", countersign.KindWrite),
			mk("payments.list", countersign.KindRead), mk("files.delete", countersign.KindWrite),
			mk("files.read", countersign.KindRead), mk("mail.send", countersign.KindWrite),
		},
		Policy: &countersign.Policy{Rules: []countersign.Rule{
			{Match: "*", Effect: countersign.EffectDeny},
			{Match: "payments.*", Effect: countersign.EffectAsk, Mode: countersign.ModeIndependent},
			{Match: "payments.refund.*", Effect: countersign.EffectAllow},
			{Match: "payments.list", Effect: countersign.EffectAllow},
			{Match: "files.*", Effect: countersign.EffectAllow},
			{Match: "files.delete", Effect: countersign.EffectAsk, Mode: countersign.ModeIndependent},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range e.Actions() {
		names = append(names, a.Name())
	}
	// mail.send only matches "*" (deny): it is not offered to the model.
	if got := strings.Join(names, ","); got != "files.delete,files.read,payments.list,payments.refund,payments.refund.partial" {
		t.Fatalf("Actions() = %s", got)
	}
	ctx := context.Background()
	status := func(action string) string {
		res, err := e.Call(ctx, &countersign.Call{Identity: tAlice, ThreadID: "t", ToolCallID: action, Action: action, Input: json.RawMessage(`{}`)})
		var d *countersign.DeniedError
		if errors.As(err, &d) {
			return "denied"
		}
		if err != nil {
			t.Fatalf("%s: %v", action, err)
		}
		return string(res.Status)
	}
	for action, want := range map[string]string{
		"payments.refund":         "pending",   // payments.* asks (independent)
		"payments.refund.partial": "succeeded", // the longer glob allows
		"payments.list":           "succeeded", // exact beats glob
		"files.delete":            "pending",   // exact ask beats files.* allow
		"files.read":              "succeeded",
		"mail.send":               "denied",
	} {
		if got := status(action); got != want {
			t.Errorf("%s: %s, want %s", action, got, want)
		}
	}

	// Without rules: reads are allowed, writes ask their requester.
	e2, err := countersign.New(countersign.Options{Store: memstore.New(nil), Actions: []*countersign.Action{
		mk("files.read", countersign.KindRead), mk("files.delete", countersign.KindWrite)}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e2.Call(ctx, &countersign.Call{Identity: tAlice, ThreadID: "t", ToolCallID: "r", Action: "files.read", Input: json.RawMessage(`{}`)})
	if err != nil || res.Status != countersign.ResultSucceeded {
		t.Fatalf("unmatched read: %+v, %v", res, err)
	}
	res, err = e2.Call(ctx, &countersign.Call{Identity: tAlice, ThreadID: "t", ToolCallID: "w", Action: "files.delete", Input: json.RawMessage(`{}`), WaitTimeout: time.Millisecond})
	if err != nil || res.Status != countersign.ResultPending || strings.Join(res.Proposal.Approvers, ",") != "requester" {
		t.Fatalf("unmatched write: %+v, %v", res, err)
	}
	if d := res.Proposal.ExpiresAt.Sub(res.Proposal.CreatedAt) - countersign.DefaultTTL; d < -time.Second || d > time.Second {
		t.Fatalf("default TTL = %v", res.Proposal.ExpiresAt.Sub(res.Proposal.CreatedAt))
	}
}

func TestPolicyValidation(t *testing.T) {
	t.Parallel()
	for name, r := range map[string]countersign.Rule{
		"empty match":     {Effect: countersign.EffectAsk},
		"bad effect":      {Match: "a", Effect: "maybe"},
		"bad approver":    {Match: "a", Effect: countersign.EffectAsk, Approvers: []string{"bob"}},
		"bad mode":        {Match: "a", Effect: countersign.EffectAsk, Mode: "later"},
		"bad channel":     {Match: "a", Effect: countersign.EffectAsk, Channels: []string{"pigeon"}},
		"bad remember":    {Match: "a", Effect: countersign.EffectAsk, Remember: []countersign.Scope{"forever"}},
		"negative quorum": {Match: "a", Effect: countersign.EffectAsk, Quorum: -1},
	} {
		_, err := countersign.New(countersign.Options{Store: memstore.New(nil), Policy: &countersign.Policy{Rules: []countersign.Rule{r}}})
		if err == nil {
			t.Errorf("%s: New succeeded, want an error", name)
		}
	}
	if _, err := countersign.New(countersign.Options{}); err == nil || !strings.Contains(err.Error(), "Store") {
		t.Errorf("New without a store: %v, want an error naming Store", err)
	}
}

func TestConfirmToolAsksWithVersionAndDefaultPreview(t *testing.T) {
	t.Parallel()
	read := mustAction(t, countersign.RawActionSpec{Name: "crm.lookup", Kind: countersign.KindRead,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`),
		Hooks: countersign.Hooks{Execute: func(context.Context, *countersign.ExecuteRequest) (*countersign.Receipt, error) {
			return &countersign.Receipt{ID: "ok"}, nil
		}}})
	ct := countersign.ConfirmTool(read)
	sum := sha256.Sum256(read.InputSchema())
	if want := "crm.lookup@" + hex.EncodeToString(sum[:8]); ct.Version() != want {
		t.Fatalf("version = %s, want %s", ct.Version(), want)
	}
	e, err := countersign.New(countersign.Options{Store: memstore.New(nil), Actions: []*countersign.Action{ct},
		// Even an allow rule cannot skip the confirmation a ConfirmTool asks for.
		Policy: &countersign.Policy{Rules: []countersign.Rule{{Match: "crm.*", Effect: countersign.EffectAllow, Mode: countersign.ModeIndependent}}}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Call(context.Background(), &countersign.Call{Identity: tAlice, ThreadID: "t", ToolCallID: "c", Action: "crm.lookup", Input: json.RawMessage(`{ "q" : "acme" }`)})
	if err != nil || res.Status != countersign.ResultPending {
		t.Fatalf("call = %+v, %v", res, err)
	}
	if res.Proposal.Preview != `crm.lookup {"q":"acme"}` {
		t.Fatalf("preview = %q", res.Proposal.Preview)
	}
}

func TestProposalCarriesTheCallAndJCSDigest(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	res := h.call(refundCall("call_1", countersign.ModeIndependent, `{"customer": "c_9", "amount": 40.0}`))
	p := res.Proposal
	canonical := `{"amount":40,"customer":"c_9"}`
	sum := sha256.Sum256([]byte(canonical))
	checks := map[string][2]string{
		"tenant":        {p.Tenant, "acme"},
		"requester":     {p.Requester, "alice"},
		"thread":        {p.ThreadID, "t1"},
		"run":           {p.RunID, "r1"},
		"tool call":     {p.ToolCallID, "call_1"},
		"action":        {p.Action, "payments.refund"},
		"version":       {p.ActionVersion, "1"},
		"input":         {string(p.Input), canonical},
		"digest":        {p.InputDigest, "sha256:" + hex.EncodeToString(sum[:])},
		"preview":       {p.Preview, "Refund 40 to c_9"},
		"title":         {p.Confirmation.Title, "Refund 40 to c_9"},
		"verb":          {p.Confirmation.Verb, "Refund"},
		"mode":          {string(p.Mode), "independent"},
		"status":        {string(p.Status), "pending"},
		"approvers":     {strings.Join(p.Approvers, ","), "role:finance"},
		"expires":       {p.ExpiresAt.Sub(p.CreatedAt).String(), "10m0s"},
		"state version": {p.StateVersion, ""},
		"operation id":  {fmt.Sprint(strings.HasPrefix(p.OperationID, "op_")), "true"},
		"proposal id":   {fmt.Sprint(strings.HasPrefix(p.ID, "prp_")), "true"},
	}
	for name, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s = %q, want %q", name, c[0], c[1])
		}
	}
	// The same call again, its input spelled otherwise (same digest), is the
	// same proposal. (Another input is a mismatch: mismatch_test.go.)
	again := h.call(refundCall("call_1", countersign.ModeIndependent, `{"amount": 4e1, "customer": "c_9"}`))
	if again.ProposalID != p.ID {
		t.Fatalf("replay created %s, want %s", again.ProposalID, p.ID)
	}
}

func TestWaitModeIsDurableAndResumable(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	c := refundCall("call_1", countersign.ModeWait, `{"amount":40,"customer":"c_9"}`)
	first := h.call(c)
	if first.Status != countersign.ResultPending || first.Proposal == nil || *first.Executed {
		t.Fatalf("first = %+v, want pending", first)
	}
	// The caller gave up; the approval arrives meanwhile.
	if d := h.decide(tBob, first.ProposalID, countersign.Approve); d.Status != countersign.DecideApplied {
		t.Fatalf("decide = %s", d.Status)
	}
	// Repeating the same call resumes: it executes and returns the result.
	second := h.call(c)
	if second.Status != countersign.ResultSucceeded || second.Receipt == "" || !*second.Executed {
		t.Fatalf("second = %+v, want succeeded", second)
	}
	// A third repeat returns the recorded outcome and never executes again.
	third := h.call(c)
	if third.Status != countersign.ResultSucceeded || third.Receipt != second.Receipt {
		t.Fatalf("third = %+v, want the recorded outcome", third)
	}
	if n := h.backend.total(); n != 1 {
		t.Fatalf("executions = %d, want 1", n)
	}
	if n := h.settledCount(first.ProposalID); n != 1 {
		t.Fatalf("OnSettled ran %d times, want 1", n)
	}
}

func TestWaitModeBlocksUntilDecided(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	c := refundCall("call_1", countersign.ModeWait, `{"amount":40,"customer":"c_9"}`)
	c.WaitTimeout = 0
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan *countersign.Result, 1)
	go func() {
		res, err := h.engine.Call(ctx, c)
		if err != nil {
			t.Error(err)
		}
		got <- res
	}()
	var id string
	for id == "" {
		p, err := h.store.GetProposalByToolCall(ctx, &store.GetProposalByToolCallParams{Tenant: "acme", ThreadID: "t1", ToolCallID: "call_1"})
		if err == nil {
			id = p.ID
		}
		time.Sleep(time.Millisecond)
	}
	h.decide(tBob, id, countersign.Reject)
	res := <-got
	if res.Status != countersign.ResultRejected || *res.Executed {
		t.Fatalf("result = %+v, want rejected", res)
	}
	if h.backend.total() != 0 {
		t.Fatal("a rejected call executed")
	}
}

func TestWaitModeCallerContextEndReturnsPendingAndError(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	c := refundCall("call_1", countersign.ModeWait, `{"amount":40,"customer":"c_9"}`)
	c.WaitTimeout = 0
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	res, err := h.engine.Call(ctx, c)
	if !errors.Is(err, context.DeadlineExceeded) || res == nil || res.Status != countersign.ResultPending || res.ProposalID == "" {
		t.Fatalf("Call = %+v, %v; want pending with the context's error", res, err)
	}
}

func TestTwoPhase(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	c := refundCall("call_1", countersign.ModeTwoPhase, `{"amount":40,"customer":"c_9"}`)
	first := h.call(c)
	if first.Status != countersign.ResultConfirmationRequired || first.ConfirmationID == "" || first.Summary != "Refund 40 to c_9" || first.ExpiresAt.IsZero() {
		t.Fatalf("first = %+v", first)
	}
	// While pending, the same confirmation comes back, for a replay and for
	// a retry that carries the evidence.
	retry := *c
	retry.ToolCallID = "call_2"
	retry.Evidence = first.ConfirmationID
	for _, cc := range []*countersign.Call{c, &retry} {
		if r := h.call(cc); r.Status != countersign.ResultConfirmationRequired || r.ConfirmationID != first.ConfirmationID {
			t.Fatalf("while pending: %+v", r)
		}
	}
	h.decide(tBob, first.ProposalID, countersign.Approve)

	// Evidence with other input: mismatch.
	wrong := retry
	wrong.ToolCallID = "call_3"
	wrong.Input = json.RawMessage(`{"amount":41,"customer":"c_9"}`)
	_, err := h.engine.Call(ctx, &wrong)
	var ev *countersign.EvidenceError
	if !errors.As(err, &ev) || ev.Reason != countersign.EvidenceMismatch || !errors.Is(err, countersign.ErrInvalidEvidence) {
		t.Fatalf("mismatch: %v", err)
	}
	// Evidence from another thread is inert: a fresh proposal, not a hint.
	other := retry
	other.ThreadID, other.ToolCallID = "t2", "call_4"
	if r := h.call(&other); r.Status != countersign.ResultConfirmationRequired || r.ProposalID == first.ProposalID {
		t.Fatalf("other thread: %+v", r)
	}
	// The right evidence executes once.
	ok := h.call(&retry)
	if ok.Status != countersign.ResultSucceeded || ok.Receipt == "" {
		t.Fatalf("spend: %+v", ok)
	}
	// Repeating the spending call returns its outcome; spending again is consumed.
	if r := h.call(&retry); r.Status != countersign.ResultSucceeded || r.Receipt != ok.Receipt {
		t.Fatalf("replay of the spending call: %+v", r)
	}
	again := retry
	again.ToolCallID = "call_5"
	if _, err := h.engine.Call(ctx, &again); !errors.As(err, &ev) || ev.Reason != countersign.EvidenceConsumed {
		t.Fatalf("consumed: %v", err)
	}
	if n := h.backend.total(); n != 1 {
		t.Fatalf("executions = %d, want 1", n)
	}
}

func TestTwoPhaseRejectedIsDeniedAndExpiredStartsOver(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	first := h.call(refundCall("call_1", countersign.ModeTwoPhase, `{"amount":40,"customer":"c_9"}`))
	h.decide(tBob, first.ProposalID, countersign.Reject)
	retry := refundCall("call_2", countersign.ModeTwoPhase, `{"amount":40,"customer":"c_9"}`)
	retry.Evidence = first.ConfirmationID
	var ev *countersign.EvidenceError
	if _, err := h.engine.Call(ctx, retry); !errors.As(err, &ev) || ev.Reason != countersign.EvidenceDenied {
		t.Fatalf("rejected evidence: %v", err)
	}

	second := h.call(refundCall("call_3", countersign.ModeTwoPhase, `{"amount":5,"customer":"c_1"}`))
	h.clock.Advance(11 * time.Minute)
	retry = refundCall("call_4", countersign.ModeTwoPhase, `{"amount":5,"customer":"c_1"}`)
	retry.Evidence = second.ConfirmationID
	fresh := h.call(retry)
	if fresh.Status != countersign.ResultConfirmationRequired || fresh.ProposalID == second.ProposalID || fresh.ConfirmationID == second.ConfirmationID {
		t.Fatalf("expired evidence should start a new cycle: %+v", fresh)
	}
	old, _ := h.engine.Proposal(ctx, tAlice, second.ProposalID)
	if old.Status != cstype.StatusExpired || h.settledCount(old.ID) != 1 {
		t.Fatalf("old proposal = %s, settled %d", old.Status, h.settledCount(old.ID))
	}
}

func TestIndependentModeReceiptAndWorker(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	res := h.call(refundCall("call_1", countersign.ModeIndependent, `{"amount":40,"customer":"c_9"}`))
	if res.Status != countersign.ResultPending || *res.Executed || res.ProposalID == "" {
		t.Fatalf("receipt = %+v", res)
	}
	h.decide(tBob, res.ProposalID, countersign.Approve)
	// Independent approvals never lapse: the worker runs it even after the TTL.
	h.clock.Advance(time.Hour)
	if n, _ := h.engine.Sweep(ctx, 0); n != 0 {
		t.Fatalf("swept %d approved independent proposals", n)
	}
	w, err := h.engine.NewWorker(countersign.WorkerOptions{PollInterval: time.Second, LeaseDuration: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := w.RunOnce(ctx); n != 1 || err != nil {
		t.Fatalf("RunOnce = %d, %v", n, err)
	}
	p, _ := h.engine.Proposal(ctx, tAlice, res.ProposalID)
	if p.Status != cstype.StatusSucceeded || h.backend.total() != 1 {
		t.Fatalf("status %s, executions %d", p.Status, h.backend.total())
	}
	if r := h.call(refundCall("call_1", countersign.ModeIndependent, `{"amount":40,"customer":"c_9"}`)); r.Status != countersign.ResultSucceeded {
		t.Fatalf("replay after settlement = %+v", r)
	}
}

func TestWorkerOptionsValidated(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	for name, o := range map[string]countersign.WorkerOptions{
		"PollInterval":   {PollInterval: -1},
		"LeaseDuration":  {LeaseDuration: -time.Second},
		"MaxConcurrency": {MaxConcurrency: -2},
		"a third":        {PollInterval: 10 * time.Second, LeaseDuration: 30 * time.Second},
	} {
		if _, err := h.engine.NewWorker(o); err == nil || !strings.Contains(err.Error(), strings.Fields(name)[0]) && name != "a third" {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func TestConcurrentIdenticalCallsCreateOneProposal(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	var wg sync.WaitGroup
	ids := make([]string, 32)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := h.engine.Call(context.Background(), refundCall("call_1", countersign.ModeIndependent, `{"amount":40,"customer":"c_9"}`))
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = res.ProposalID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("proposal ids differ: %v", ids)
		}
	}
	page, _ := h.store.ListProposals(context.Background(), &store.ListProposalsParams{Tenant: "acme"})
	if len(page.Proposals) != 1 {
		t.Fatalf("%d proposals, want 1", len(page.Proposals))
	}
}

func TestReplacementSupersedesPending(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	first := h.call(refundCall("call_1", countersign.ModeIndependent, `{"amount":40,"customer":"c_9"}`))
	other := h.call(refundCall("call_2", countersign.ModeIndependent, `{"amount":40,"customer":"c_1"}`))
	second := h.call(refundCall("call_3", countersign.ModeIndependent, `{"amount":45,"customer":"c_9"}`))
	ctx := context.Background()
	p1, _ := h.engine.Proposal(ctx, tAlice, first.ProposalID)
	p2, _ := h.engine.Proposal(ctx, tAlice, other.ProposalID)
	if p1.Status != cstype.StatusSuperseded || p2.Status != cstype.StatusPending || second.Status != countersign.ResultPending {
		t.Fatalf("statuses: first %s, other %s, second %s", p1.Status, p2.Status, second.Status)
	}
	if h.settledCount(p1.ID) != 1 {
		t.Fatalf("superseded proposal settled %d times", h.settledCount(p1.ID))
	}
	// Replaying the older call supersedes nothing.
	h.call(refundCall("call_1", countersign.ModeIndependent, `{"amount":40,"customer":"c_9"}`))
	p3, _ := h.engine.Proposal(ctx, tAlice, second.ProposalID)
	if p3.Status != cstype.StatusPending {
		t.Fatalf("replay superseded the newer proposal: %s", p3.Status)
	}
}

func TestDecisionRules(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: []countersign.Rule{
		{Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance", "requester"}, Quorum: 2,
			ForbidSelfApproval: true, Channels: []string{"web", "cli"}, Mode: countersign.ModeIndependent},
	}})
	ctx := context.Background()
	res := h.call(refundCall("call_1", countersign.ModeIndependent, `{"amount":40,"customer":"c_9"}`))
	id := res.ProposalID
	decide := func(who countersign.Identity, v countersign.Verdict, via string) (*countersign.DecideResult, error) {
		return h.engine.Decide(ctx, &countersign.Decision{Identity: who, ProposalID: id, Verdict: v, Via: via})
	}
	var fe *countersign.ForbiddenError
	if _, err := decide(tBob, countersign.Approve, "api"); !errors.As(err, &fe) || !strings.Contains(fe.Reason, "via") {
		t.Fatalf("channel restriction: %v", err)
	}
	if _, err := decide(tAlice, countersign.Approve, "web"); !errors.As(err, &fe) || !strings.Contains(fe.Reason, "self-approval") {
		t.Fatalf("self-approval: %v", err)
	}
	if _, err := decide(tDave, countersign.Approve, "web"); !errors.Is(err, countersign.ErrForbidden) {
		t.Fatalf("non-approver: %v", err)
	}
	if _, err := decide(tEve, countersign.Approve, "web"); !errors.Is(err, countersign.ErrForbidden) {
		t.Fatalf("other tenant: %v", err)
	}
	if r, err := decide(tBob, countersign.Approve, "web"); err != nil || r.Status != countersign.DecideApplied || r.Proposal.Status != cstype.StatusPending {
		t.Fatalf("first approval: %+v, %v", r, err)
	}
	if r, _ := decide(tBob, countersign.Approve, "cli"); r.Status != countersign.DecideUnchanged {
		t.Fatalf("same approver again: %s", r.Status)
	}
	if r, _ := decide(tCarol, countersign.Approve, "cli"); r.Status != countersign.DecideApplied || r.Proposal.Status != cstype.StatusApproved {
		t.Fatalf("quorum: %+v", r)
	}
	if r, _ := decide(tCarol, countersign.Reject, "cli"); r.Status != countersign.DecideConflict {
		t.Fatalf("reject after approval: %s", r.Status)
	}
	d := r0(h.engine.Proposal(ctx, tAlice, id)).Decisions
	if len(d) != 2 || d[0].Actor != "bob" || d[0].Via != "web" || d[1].Actor != "carol" || d[1].Via != "cli" || d[0].At.IsZero() {
		t.Fatalf("recorded decisions = %+v", d)
	}
	if _, err := h.engine.Decide(ctx, &countersign.Decision{Identity: tBob, ProposalID: "prp_missing", Verdict: countersign.Approve}); !errors.Is(err, countersign.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}

	// Expired: a decision after the deadline never authorizes anything.
	late := h.call(refundCall("call_2", countersign.ModeIndependent, `{"amount":1,"customer":"c_2"}`))
	h.clock.Advance(11 * time.Minute)
	r, err := h.engine.Decide(ctx, &countersign.Decision{Identity: tBob, ProposalID: late.ProposalID, Verdict: countersign.Approve, Via: "web"})
	if err != nil || r.Status != countersign.DecideExpired || r.Proposal.Status != cstype.StatusExpired {
		t.Fatalf("late decision: %+v, %v", r, err)
	}
	if h.settledCount(late.ProposalID) != 1 {
		t.Fatal("expiry by a late decision did not settle once")
	}
}

func r0[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestCancelAndResolve(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	res := h.call(refundCall("call_1", countersign.ModeIndependent, `{"amount":40,"customer":"c_9"}`))
	if _, err := h.engine.Cancel(ctx, tBob, res.ProposalID, "api", "no"); !errors.Is(err, countersign.ErrForbidden) {
		t.Fatalf("cancel by another: %v", err)
	}
	dr, err := h.engine.Cancel(ctx, tAlice, res.ProposalID, "api", "changed my mind")
	if err != nil || dr.Status != countersign.DecideApplied || dr.Proposal.Status != cstype.StatusCancelled || dr.Proposal.Outcome == nil {
		t.Fatalf("cancel: %+v, %v", dr, err)
	}
	// The requester asking again is told nothing changed; anyone else is
	// still refused.
	if again, err := h.engine.Cancel(ctx, tAlice, res.ProposalID, "api", ""); err != nil || again.Status != countersign.DecideUnchanged || again.Proposal.Status != cstype.StatusCancelled {
		t.Fatalf("cancel again: %+v, %v; want unchanged", again, err)
	}
	if _, err := h.engine.Cancel(ctx, tBob, res.ProposalID, "api", "no"); !errors.Is(err, countersign.ErrForbidden) {
		t.Fatalf("cancel of a cancelled proposal by another: %v", err)
	}
	if _, err := h.engine.Resolve(ctx, tBob, res.ProposalID, cstype.StatusSucceeded, "", "note", "api"); !errors.Is(err, countersign.ErrConflict) {
		t.Fatalf("resolve a cancelled proposal: %v", err)
	}
	if _, err := h.engine.Resolve(ctx, tCarol, res.ProposalID, cstype.StatusSucceeded, "", "note", "api"); !errors.Is(err, countersign.ErrForbidden) {
		t.Fatalf("resolve without the operator role: %v", err)
	}
}

func TestExecutionRechecks(t *testing.T) {
	t.Parallel()
	gone := resolverFunc(func(ctx context.Context, tenant, actor string) (*countersign.Identity, error) {
		return nil, fmt.Errorf("actor %s: %w", actor, countersign.ErrNotFound)
	})
	moved := resolverFunc(func(ctx context.Context, tenant, actor string) (*countersign.Identity, error) {
		return &countersign.Identity{Tenant: "elsewhere", Actor: actor}, nil
	})
	cases := []struct {
		name     string
		resolver countersign.ActorResolver
		change   func(b *backend) *countersign.Action // re-registered between approval and execution
		status   cstype.Status
		executed bool
		errPart  string
	}{
		{name: "requester gone", resolver: gone, status: cstype.StatusFailed, errPart: "no longer exists"},
		{name: "tenant changed", resolver: moved, status: cstype.StatusFailed, errPart: "no longer belongs"},
		{name: "new version", change: func(b *backend) *countersign.Action {
			s := refundSpec(b)
			s.Version = "2"
			return mustAction(t, s)
		}, status: cstype.StatusFailed, errPart: "ACTION_VERSION_CHANGED: action payments.refund version 1"},
		{name: "authorization refused", change: func(b *backend) *countersign.Action {
			s := refundSpec(b)
			s.Hooks.Authorize = func(ctx context.Context, req *countersign.AuthorizeRequest) error {
				if req.Phase == countersign.PhaseExecute {
					return errors.New("card frozen")
				}
				return nil
			}
			return mustAction(t, s)
		}, status: cstype.StatusFailed, errPart: "card frozen"},
		{name: "schema drift", change: func(b *backend) *countersign.Action {
			s := refundSpec(b)
			s.InputSchema = json.RawMessage(`{"type":"object","required":["amount","customer","currency"]}`)
			return mustAction(t, s)
		}, status: cstype.StatusFailed, errPart: "approved snapshot"},
		{name: "preflight denied", change: func(b *backend) *countersign.Action {
			s := refundSpec(b)
			s.Hooks.Preflight = func(ctx context.Context, req *countersign.PreflightRequest) (*countersign.Preflight, error) {
				if req.Phase == countersign.PhaseExecute {
					return &countersign.Preflight{Verdict: countersign.PreflightDenied, Reason: "already refunded elsewhere"}, nil
				}
				return &countersign.Preflight{Verdict: countersign.PreflightReady}, nil
			}
			return mustAction(t, s)
		}, status: cstype.StatusFailed, errPart: "already refunded"},
		{name: "preflight completed", change: func(b *backend) *countersign.Action {
			s := refundSpec(b)
			s.Hooks.Preflight = func(ctx context.Context, req *countersign.PreflightRequest) (*countersign.Preflight, error) {
				return &countersign.Preflight{Verdict: countersign.PreflightCompleted, Receipt: "rf_existing"}, nil
			}
			return mustAction(t, s)
		}, status: cstype.StatusSucceeded},
		{name: "definite failure", change: func(b *backend) *countersign.Action {
			b.script = []error{countersign.NotApplied(errors.New("card declined"))}
			return mustAction(t, refundSpec(b))
		}, status: cstype.StatusFailed, executed: true, errPart: "card declined"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{resolver: tc.resolver})
			res := h.call(refundCall("call_1", countersign.ModeWait, `{"amount":40,"customer":"c_9"}`))
			h.decide(tBob, res.ProposalID, countersign.Approve)
			if tc.change != nil {
				if err := h.engine.Register(tc.change(h.backend)); err != nil {
					t.Fatal(err)
				}
			}
			out := h.call(refundCall("call_1", countersign.ModeWait, `{"amount":40,"customer":"c_9"}`))
			p := out.Proposal
			if p.Status != tc.status {
				t.Fatalf("status = %s (%+v), want %s", p.Status, p.Outcome, tc.status)
			}
			if tc.errPart != "" && !strings.Contains(out.Error, tc.errPart) {
				t.Fatalf("error = %q, want it to mention %q", out.Error, tc.errPart)
			}
			if got := h.backend.total(); (got == 1) != tc.executed {
				t.Fatalf("executions = %d, executed want %v", got, tc.executed)
			}
			if h.settledCount(p.ID) != 1 {
				t.Fatalf("OnSettled ran %d times", h.settledCount(p.ID))
			}
		})
	}
}

type resolverFunc func(ctx context.Context, tenant, actor string) (*countersign.Identity, error)

func (f resolverFunc) ResolveActor(ctx context.Context, tenant, actor string) (*countersign.Identity, error) {
	return f(ctx, tenant, actor)
}

func TestUncertainOutcomes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		idempotent bool
		reconcile  *countersign.ReconcileStatus
		script     []error
		status     cstype.Status
		executions int
		attempts   string
	}{
		{name: "neither: unknown", script: []error{errUncertain}, status: cstype.StatusUnknown, executions: 1, attempts: "1"},
		{name: "idempotent: retried with the same operation id", idempotent: true, script: []error{errUncertain, errUncertain}, status: cstype.StatusSucceeded, executions: 3, attempts: "1,2,3"},
		{name: "idempotent: bounded attempts", idempotent: true, script: []error{errUncertain, errUncertain, errUncertain, errUncertain, errUncertain}, status: cstype.StatusUnknown, executions: 5, attempts: "1,2,3,4,5"},
		{name: "reconcile: applied", reconcile: ptrTo(countersign.ReconcileApplied), script: []error{errUncertain}, status: cstype.StatusSucceeded, executions: 1, attempts: "1"},
		{name: "reconcile: not applied", reconcile: ptrTo(countersign.ReconcileNotApplied), script: []error{errUncertain}, status: cstype.StatusFailed, executions: 1, attempts: "1"},
		{name: "reconcile: unknown stays reconciling", reconcile: ptrTo(countersign.ReconcileUnknown), script: []error{errUncertain}, status: cstype.StatusReconciling, executions: 1, attempts: "1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{actions: func(b *backend) []*countersign.Action {
				s := refundSpec(b)
				s.Idempotent = tc.idempotent
				if tc.reconcile != nil {
					s.Hooks.Reconcile = func(ctx context.Context, req *countersign.ReconcileRequest) (*countersign.Reconciliation, error) {
						return &countersign.Reconciliation{Status: *tc.reconcile, Receipt: "rc_reconciled"}, nil
					}
				}
				b.script = tc.script
				return []*countersign.Action{mustAction(t, s)}
			}})
			res := h.call(refundCall("call_1", countersign.ModeWait, `{"amount":40,"customer":"c_9"}`))
			h.decide(tBob, res.ProposalID, countersign.Approve)
			out := h.call(refundCall("call_1", countersign.ModeWait, `{"amount":40,"customer":"c_9"}`))
			p := out.Proposal
			if p.Status != tc.status {
				t.Fatalf("status = %s (%+v), want %s", p.Status, p.Outcome, tc.status)
			}
			if len(h.backend.calls) != 1 || h.backend.total() != tc.executions {
				t.Fatalf("executions = %v, want %d under one operation id", h.backend.calls, tc.executions)
			}
			if got := strings.Trim(strings.Join(strings.Fields(fmt.Sprint(h.backend.attempts)), ","), "[]"); got != tc.attempts {
				t.Fatalf("attempts = %s, want %s", got, tc.attempts)
			}
			switch p.Status {
			case cstype.StatusUnknown:
				if out.Executed != nil || !strings.Contains(p.Outcome.Summary, "Do not retry automatically") {
					t.Fatalf("unknown outcome = %+v", p.Outcome)
				}
			case cstype.StatusReconciling:
				if p.NextAttemptAt == nil || p.Lease != nil || out.Executed != nil {
					t.Fatalf("reconciling: next %v, lease %+v", p.NextAttemptAt, p.Lease)
				}
			case cstype.StatusSucceeded:
				if tc.reconcile != nil && p.Outcome.Receipt != "rc_reconciled" {
					t.Fatalf("receipt = %s", p.Outcome.Receipt)
				}
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestUnconsumedApprovalLapses(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	res := h.call(refundCall("call_1", countersign.ModeWait, `{"amount":40,"customer":"c_9"}`))
	h.decide(tBob, res.ProposalID, countersign.Approve)
	// The caller never comes back.
	h.clock.Advance(11 * time.Minute)
	if n, err := h.engine.Sweep(ctx, 10); n != 1 || err != nil {
		t.Fatalf("Sweep = %d, %v", n, err)
	}
	p, _ := h.engine.Proposal(ctx, tAlice, res.ProposalID)
	if p.Status != cstype.StatusExpired || h.backend.total() != 0 || h.settledCount(p.ID) != 1 {
		t.Fatalf("status %s, executions %d, settled %d", p.Status, h.backend.total(), h.settledCount(p.ID))
	}
	// The late caller is told it expired, and nothing runs.
	if r := h.call(refundCall("call_1", countersign.ModeWait, `{"amount":40,"customer":"c_9"}`)); r.Status != countersign.ResultExpired {
		t.Fatalf("late caller: %+v", r)
	}
}

func TestGrants(t *testing.T) {
	t.Parallel()
	var authorizeCalls atomic.Int32
	var denyAll atomic.Bool
	h := newHarness(t, harnessOpts{
		rules: []countersign.Rule{{Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"},
			Remember: []countersign.Scope{countersign.ScopeThread}}},
		actions: func(b *backend) []*countersign.Action {
			s := refundSpec(b)
			s.Hooks.Authorize = func(ctx context.Context, req *countersign.AuthorizeRequest) error {
				authorizeCalls.Add(1)
				if denyAll.Load() {
					return errors.New("account locked")
				}
				return nil
			}
			return []*countersign.Action{mustAction(t, s)}
		},
	})
	ctx := context.Background()
	in := `{"amount":40,"customer":"c_9"}`
	first := h.call(refundCall("call_1", countersign.ModeWait, in))
	// The rule allows only thread grants.
	if _, err := h.engine.Decide(ctx, &countersign.Decision{Identity: tBob, ProposalID: first.ProposalID, Verdict: countersign.Approve, Remember: countersign.ScopeRun}); !errors.Is(err, countersign.ErrInvalidRemember) {
		t.Fatalf("run grant: %v", err)
	}
	if _, err := h.engine.Decide(ctx, &countersign.Decision{Identity: tBob, ProposalID: first.ProposalID, Verdict: countersign.Reject, Remember: countersign.ScopeThread}); !errors.Is(err, countersign.ErrInvalidCall) {
		t.Fatalf("remembered rejection: %v", err)
	}
	if _, err := h.engine.Decide(ctx, &countersign.Decision{Identity: tBob, ProposalID: first.ProposalID, Verdict: countersign.Approve, Remember: countersign.ScopeThread}); err != nil {
		t.Fatal(err)
	}
	// Not live until the originating execution succeeded.
	if r := h.call(refundCall("call_2", countersign.ModeWait, in)); r.Status != countersign.ResultPending {
		t.Fatalf("before the first execution: %+v", r)
	}
	if r := h.call(refundCall("call_1", countersign.ModeWait, in)); r.Status != countersign.ResultSucceeded {
		t.Fatalf("first execution: %+v", r)
	}
	// Now an identical call in the thread runs without a human, still authorized.
	before := authorizeCalls.Load()
	auto := h.call(refundCall("call_3", countersign.ModeWait, in))
	if auto.Status != countersign.ResultSucceeded || auto.GrantID == "" || authorizeCalls.Load() == before {
		t.Fatalf("auto-approved call: %+v", auto)
	}
	// It still has a proposal, approved by the grant, so a replay returns the
	// recorded outcome instead of executing again.
	if d := auto.Proposal.Decisions; len(d) != 1 || d[0].Via != "grant" || d[0].Actor != "grant:"+auto.GrantID {
		t.Fatalf("grant decision = %+v", d)
	}
	executions := h.backend.total()
	if r := h.call(refundCall("call_3", countersign.ModeWait, in)); r.Receipt != auto.Receipt || r.GrantID != auto.GrantID || h.backend.total() != executions {
		t.Fatalf("replay of an auto-approved call executed again: %+v", r)
	}
	// Other input, or another thread, still asks.
	if r := h.call(refundCall("call_4", countersign.ModeWait, `{"amount":41,"customer":"c_9"}`)); r.Status != countersign.ResultPending {
		t.Fatalf("other input: %+v", r)
	}
	oc := refundCall("call_5", countersign.ModeWait, in)
	oc.ThreadID = "t2"
	if r := h.call(oc); r.Status != countersign.ResultPending {
		t.Fatalf("other thread: %+v", r)
	}
	// Authorization still runs: a refusal beats the grant.
	denyAll.Store(true)
	if _, err := h.engine.Call(ctx, refundCall("call_6", countersign.ModeWait, in)); !errors.Is(err, countersign.ErrDenied) {
		t.Fatalf("auto-approved but unauthorized: %v", err)
	}
	denyAll.Store(false)
	// A deny rule outranks the grant.
	deny, err := countersign.New(countersign.Options{Store: h.store, Now: h.clock.Now, Actions: []*countersign.Action{mustAction(t, refundSpec(h.backend))},
		Policy: &countersign.Policy{Rules: []countersign.Rule{{Match: "payments.refund", Effect: countersign.EffectDeny}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deny.Call(ctx, refundCall("call_7", countersign.ModeWait, in)); !errors.Is(err, countersign.ErrDenied) {
		t.Fatalf("deny rule vs grant: %v", err)
	}
	// Revoked: asks again.
	grants, _ := h.engine.Grants(ctx, tAlice, "t1")
	if len(grants) != 1 || grants[0].ActivatedAt == nil {
		t.Fatalf("grants = %+v", grants)
	}
	if _, err := h.engine.RevokeGrant(ctx, tBob, grants[0].ID); err != nil {
		t.Fatal(err)
	}
	if r := h.call(refundCall("call_8", countersign.ModeWait, in)); r.Status != countersign.ResultPending {
		t.Fatalf("after revocation: %+v", r)
	}
	if _, err := h.engine.RevokeGrant(ctx, tEve, grants[0].ID); !errors.Is(err, countersign.ErrNotFound) {
		t.Fatalf("revoke across tenants: %v", err)
	}
}

func TestGrantWidenedByRuleAndTTL(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: []countersign.Rule{{Match: "payments.*", Effect: countersign.EffectAsk,
		Approvers: []string{"role:finance"}, Remember: []countersign.Scope{countersign.ScopeRun}, GrantAnyInput: true, GrantTTL: time.Minute}}})
	ctx := context.Background()
	first := h.call(refundCall("call_1", countersign.ModeWait, `{"amount":40,"customer":"c_9"}`))
	if _, err := h.engine.Decide(ctx, &countersign.Decision{Identity: tBob, ProposalID: first.ProposalID, Verdict: countersign.Approve, Remember: countersign.ScopeRun}); err != nil {
		t.Fatal(err)
	}
	h.call(refundCall("call_1", countersign.ModeWait, `{"amount":40,"customer":"c_9"}`))
	if r := h.call(refundCall("call_2", countersign.ModeWait, `{"amount":7,"customer":"c_1"}`)); r.Status != countersign.ResultSucceeded || r.GrantID == "" {
		t.Fatalf("widened grant, any input: %+v", r)
	}
	other := refundCall("call_3", countersign.ModeWait, `{"amount":7,"customer":"c_1"}`)
	other.RunID = "r2"
	if r := h.call(other); r.Status != countersign.ResultPending {
		t.Fatalf("run grant in another run: %+v", r)
	}
	h.clock.Advance(2 * time.Minute)
	if r := h.call(refundCall("call_4", countersign.ModeWait, `{"amount":8,"customer":"c_1"}`)); r.Status != countersign.ResultPending {
		t.Fatalf("after the grant's TTL: %+v", r)
	}
}

func TestTypedErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: []countersign.Rule{{Match: "payments.*", Effect: countersign.EffectDeny}}})
	ctx := context.Background()
	_, err := h.engine.Call(ctx, refundCall("c", "", `{"amount":40,"customer":"c_9"}`))
	var d *countersign.DeniedError
	if !errors.As(err, &d) || d.Code != countersign.DeniedByPolicy || !errors.Is(err, countersign.ErrDenied) {
		t.Fatalf("denied: %v", err)
	}
	c := refundCall("c", "", `{}`)
	c.Action = "nope"
	if _, err := h.engine.Call(ctx, c); !errors.Is(err, countersign.ErrActionNotFound) {
		t.Fatalf("unknown action: %v", err)
	}
	c = refundCall("", "", `{}`)
	if _, err := h.engine.Call(ctx, c); !errors.Is(err, countersign.ErrInvalidCall) {
		t.Fatalf("no tool call id: %v", err)
	}
	if _, err := h.engine.Proposal(ctx, tAlice, "prp_nope"); !errors.Is(err, countersign.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	var ce *countersign.ConflictError
	h2 := newHarness(t, harnessOpts{})
	res := h2.call(refundCall("c1", countersign.ModeIndependent, `{"amount":40,"customer":"c_9"}`))
	h2.decide(tBob, res.ProposalID, countersign.Approve)
	_, err = h2.engine.Cancel(ctx, tAlice, res.ProposalID, "api", "")
	if !errors.As(err, &ce) || ce.Got != cstype.StatusApproved || !errors.Is(err, countersign.ErrConflict) {
		t.Fatalf("conflict: %v", err)
	}
}

func TestOnSettledRunsOncePerSettlementUnderRaces(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	res := h.call(refundCall("call_1", countersign.ModeWait, `{"amount":40,"customer":"c_9"}`))
	h.decide(tBob, res.ProposalID, countersign.Approve)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := h.engine.Call(ctx, refundCall("call_1", countersign.ModeWait, `{"amount":40,"customer":"c_9"}`))
			if err != nil || r.Status != countersign.ResultSucceeded {
				t.Errorf("concurrent resume: %+v, %v", r, err)
			}
		}()
	}
	wg.Wait()
	if h.backend.total() != 1 || h.settledCount(res.ProposalID) != 1 {
		t.Fatalf("executions %d, settled %d; want 1 and 1", h.backend.total(), h.settledCount(res.ProposalID))
	}
}
