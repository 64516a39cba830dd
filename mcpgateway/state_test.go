package mcpgateway

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/server/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testStateSecret signs the states of the gateways that share a store in
// these tests, as mcp.state_secret_env would.
var testStateSecret = []byte("0123456789abcdef0123456789abcdef-state")

// connectKeyManual connects a client instance as the holder of key that
// declares elicitation but answers input requests itself (see
// connectManual).
func (h *harness) connectKeyManual(keys *auth.APIKeys, key string) *client {
	h.t.Helper()
	cred, err := auth.AuthenticateCredential(h.ctx, keys, key)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.connectServed(func(st mcp.Transport) error { return h.gw.ServeCredential(h.ctx, st, key, cred) },
		accept(false), &mcp.MultiRoundTripOptions{Disabled: true})
}

// answerIn repeats the email call in thread (none: the credential's) with
// answer under state.
func (h *harness) answerIn(c *client, args, thread, state string, answer *mcp.ElicitResult) *mcp.CallToolResult {
	h.t.Helper()
	params := &mcp.CallToolParams{Name: "up__send_email", Arguments: json.RawMessage(args), RequestState: state}
	if answer != nil {
		params.InputResponses = mcp.InputResponseMap{approvalInput: answer}
	}
	if thread != "" {
		params.Meta = mcp.Meta{MetaThread: thread}
	}
	res, err := c.cs.CallTool(h.ctx, params)
	if err != nil {
		h.t.Fatal(err)
	}
	return res
}

var approveAnswer = &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}

// forge signs st with secret, as only the gateway should.
func forge(secret []byte, st requestState) string {
	g := &Gateway{stateSecret: secret}
	raw, _ := json.Marshal(st) // strings and a number always encode
	payload := base64.RawURLEncoding.EncodeToString(raw)
	return stateVersion + "." + payload + "." + base64.RawURLEncoding.EncodeToString(g.stateMAC(payload))
}

// readState decodes a state's payload, as any client can.
func readState(t *testing.T, state string) requestState {
	t.Helper()
	parts := strings.Split(state, ".")
	if len(parts) != 3 || parts[0] != "v1" {
		t.Fatalf("state %q: want v1.<payload>.<mac>", state)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var st requestState
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// A 2026-07-28 request state decides only as it was made: signed by the
// gateways' secret, for the caller, its credential, the proposal, the tool
// and its input, before its deadline, once. Every other state (tampered,
// forged under another secret, foreign in any field it binds, expired,
// replayed, in this process or another) decides nothing, and the call is
// answered as a repeat: the proposal stays pending, the upstream uncalled.
func TestRequestStateHostile(t *testing.T) {
	for _, kind := range trustStores {
		t.Run(kind, func(t *testing.T) { testRequestStateHostile(t, kind) })
	}
}

func testRequestStateHostile(t *testing.T, kind string) {
	st := newStore(t, kind)
	keys := testKeys(t)
	h := newHarness(t, harnessOptions{hold: 20 * time.Millisecond, store: st, stateSecret: testStateSecret})
	// Another process over the same store, with the same secret.
	h2 := newHarness(t, harnessOptions{hold: 20 * time.Millisecond, store: st, stateSecret: testStateSecret})
	c := h.connectKeyManual(keys, "key_alice")
	state, pid := h.asked(c, email)
	made := readState(t, state)
	if made.Tenant != "acme" || made.Actor != "alice" || made.Kind != "human" || made.Credential != strings.TrimPrefix(keyThread("key_alice"), "mcp:") ||
		made.Proposal != pid || made.Tool != "up__send_email" || made.InputDigest == "" || len(made.Nonce) != 32 {
		t.Fatalf("the state binds %+v", made)
	}
	p, err := h.engine.Proposal(h.ctx, alice, pid)
	if err != nil {
		t.Fatal(err)
	}
	if made.Deadline != p.ExpiresAt.UnixMilli() || made.InputDigest != p.InputDigest {
		t.Fatalf("state deadline %d digest %s, want the proposal's %d %s", made.Deadline, made.InputDigest, p.ExpiresAt.UnixMilli(), p.InputDigest)
	}
	// The same question asked of alice in a thread she names, which her
	// other key may continue too.
	sharedState, sharedPID := "", ""
	{
		res := h.answerIn(c, email, "alices-project", "", nil)
		form, _ := res.InputRequests[approvalInput].(*mcp.ElicitParams)
		m := proposalInForm.FindStringSubmatch(formMessage(form))
		if form == nil || m == nil {
			t.Fatalf("the call in alices-project: %+v", res)
		}
		sharedState, sharedPID = res.RequestState, m[1]
	}
	otherSecret := []byte("another-secret-another-secret-another")
	with := func(change func(*requestState)) requestState {
		s := made
		change(&s)
		return s
	}
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	payloadAt := len("v1.") + 2
	rows := []struct {
		name   string
		client *client
		thread string
		state  string
	}{
		{"empty", c, "", ""},
		{"the proposal id", c, "", pid},
		{"garbage", c, "", "not a state"},
		{"another version", c, "", "v2" + strings.TrimPrefix(state, "v1")},
		{"payload tampered", c, "", flip(state, payloadAt)},
		{"mac tampered", c, "", flip(state, len(state)-3)},
		{"mac cut", c, "", state[:len(state)-4]},
		{"no mac", c, "", state[:strings.LastIndex(state, ".")]},
		{"too long", c, "", state + strings.Repeat("A", maxState)},
		{"signed under another secret", c, "", forge(otherSecret, made)},
		{"another tenant", c, "", forge(testStateSecret, with(func(s *requestState) { s.Tenant = "evil" }))},
		{"another actor", c, "", forge(testStateSecret, with(func(s *requestState) { s.Actor = "bob" }))},
		{"another kind", c, "", forge(testStateSecret, with(func(s *requestState) { s.Kind = "agent" }))},
		{"another credential", c, "", forge(testStateSecret, with(func(s *requestState) { s.Credential = "0000000000000000" }))},
		{"another proposal", c, "", forge(testStateSecret, with(func(s *requestState) { s.Proposal = sharedPID }))},
		{"another tool", c, "", forge(testStateSecret, with(func(s *requestState) { s.Tool = "up__flaky" }))},
		{"another input", c, "", forge(testStateSecret, with(func(s *requestState) { s.InputDigest = strings.Repeat("0", 64) }))},
		{"no nonce", c, "", forge(testStateSecret, with(func(s *requestState) { s.Nonce = "" }))},
		{"expired", c, "", forge(testStateSecret, with(func(s *requestState) { s.Deadline = time.Now().Add(-time.Second).UnixMilli() }))},
		// The state of the question in alices-project, presented by
		// another of alice's keys in that thread: not its credential's.
		{"presented by another credential", h.connectKeyManual(keys, "key_alice_2"), "alices-project", sharedState},
		// alice's state, presented with another thread's repeat.
		{"presented about another proposal", c, "alices-project", state},
	}
	for _, row := range rows {
		res := h.answerIn(row.client, email, row.thread, row.state, approveAnswer)
		if !undecidedAnswer(t, res) {
			t.Errorf("%s: %q %+v, want the call answered as a repeat", row.name, text(res), res.StructuredContent)
		}
	}
	for _, id := range []string{pid, sharedPID} {
		p, err := h.engine.Proposal(h.ctx, alice, id)
		if err != nil {
			t.Fatal(err)
		}
		if p.Status != cstype.StatusPending || len(p.Decisions) != 0 {
			t.Fatalf("proposal %s %s with decisions %+v after hostile states: want pending, undecided", id, p.Status, p.Decisions)
		}
	}
	if n := len(h.up.callsOf("send_email")) + len(h2.up.callsOf("send_email")); n != 0 {
		t.Fatalf("the upstream was called %d times", n)
	}

	// Presented as made, once, with cancel (dismissed: nothing decided):
	// the nonce is spent, so presenting it again, here or in the other
	// process, with an approval, decides nothing.
	h.answerIn(c, email, "", state, &mcp.ElicitResult{Action: "cancel"})
	for _, hh := range []*harness{h, h2} {
		res := hh.answerIn(hh.connectKeyManual(keys, "key_alice"), email, "", state, approveAnswer)
		if !undecidedAnswer(t, res) {
			t.Fatalf("a replayed state: %q %+v, want the call answered as a repeat", text(res), res.StructuredContent)
		}
	}
	if p, _ := h.engine.Proposal(h.ctx, alice, pid); p.Status != cstype.StatusPending {
		t.Fatalf("proposal %s after a replayed state, want pending", p.Status)
	}
	// A fresh state, made by one process, decides in the other: the
	// proposal is approved via mcp by alice and run once.
	c2 := h2.connectKeyManual(keys, "key_alice")
	fresh, freshPID := h2.asked(c2, email)
	if freshPID != pid {
		t.Fatalf("the question asked again names %s, want %s", freshPID, pid)
	}
	res := h.answerIn(h.connectKeyManual(keys, "key_alice"), email, "", fresh, approveAnswer)
	if res.IsError || text(res) != "sent to bob@example.com" {
		t.Fatalf("the answer with a fresh state from another process: %q %+v", text(res), res.StructuredContent)
	}
	p, err = h.engine.Proposal(h.ctx, alice, pid)
	if err != nil || p.Status != cstype.StatusSucceeded || len(p.Decisions) != 1 || p.Decisions[0].Via != countersign.ViaMCP || p.Decisions[0].Actor != "alice" {
		t.Fatalf("proposal %+v %v: want succeeded, approved by alice via mcp", p, err)
	}
	if n := len(h.up.callsOf("send_email")) + len(h2.up.callsOf("send_email")); n != 1 {
		t.Fatalf("the upstream was called %d times, want once", n)
	}
}

// FuzzRequestState: no state a client makes up opens, short of the
// secret's MAC; and opening never panics.
func FuzzRequestState(f *testing.F) {
	g := &Gateway{stateSecret: testStateSecret}
	good := forge(testStateSecret, requestState{Tenant: "acme", Actor: "alice", Kind: "human", Credential: "0123456789abcdef",
		Proposal: "prp_1", Tool: "up__send_email", InputDigest: strings.Repeat("a", 64), Nonce: strings.Repeat("b", 32), Deadline: 1})
	f.Add(good)
	f.Add("v1..")
	f.Add("v1.e30.")
	f.Add("")
	f.Fuzz(func(t *testing.T, raw string) {
		st, ok := g.openState(raw)
		if ok && raw != good {
			// A state that opens must carry the MAC of its payload.
			parts := strings.Split(raw, ".")
			if len(parts) != 3 || parts[2] != base64.RawURLEncoding.EncodeToString(g.stateMAC(parts[1])) {
				t.Fatalf("%q opened to %+v without its MAC", raw, st)
			}
		}
	})
}

// The 2026-07-28 question (and its state) is offered only to whom may
// decide the proposal through mcp, under a rule that asks no step-up: a
// rule without mcp among its channels, one that asks a passkey, or a
// caller who is not an approver, is held and answered pending, asked
// nothing.
func TestStateOfferedOnlyToWhoMayDecide(t *testing.T) {
	for _, row := range []struct {
		name  string
		rule  countersign.Rule
		asked bool
	}{
		{"the requester, any channel", countersign.Rule{Match: "up__send_email", Effect: countersign.EffectAsk, Approvers: []string{"requester"}}, true},
		{"channels without mcp", countersign.Rule{Match: "up__send_email", Effect: countersign.EffectAsk, Approvers: []string{"requester"}, Channels: []string{"web", "api"}}, false},
		{"a passkey step-up", countersign.Rule{Match: "up__send_email", Effect: countersign.EffectAsk, Approvers: []string{"requester"}, StepUp: countersign.StepUpPasskey}, false},
		{"not an approver", countersign.Rule{Match: "up__send_email", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}}, false},
	} {
		t.Run(row.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{hold: 20 * time.Millisecond, rules: []countersign.Rule{row.rule}})
			c := h.connectKeyManual(testKeys(t), "key_alice")
			res := h.call(c, "up__send_email", email)
			if asked := res.InputRequests != nil && res.RequestState != ""; asked != row.asked {
				t.Fatalf("asked %v (%+v), want %v", asked, res, row.asked)
			}
			if !row.asked && structured(t, res)["status"] != "pending" {
				t.Fatalf("result %v, want pending", res.StructuredContent)
			}
		})
	}
}
