package countersign_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/passkeytest"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/storetest"
)

const stepUpURL = "https://countersign.acme.example"

// stepUpHarness is a harness whose refunds need two approvals from finance,
// each with a passkey.
func stepUpHarness(t *testing.T, open storeOpener) *harness {
	return newHarness(t, harnessOpts{
		open: open,
		rules: []countersign.Rule{{
			Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}, Quorum: 2,
			StepUp: countersign.StepUpPasskey,
		}},
		engineOpts: func(o *countersign.Options) { o.PublicURL = stepUpURL },
	})
}

// enrolPasskey has operator bob make an enrollment link for who, and who
// enrol auth's new passkey through it; it returns the link's token.
func enrolPasskey(t *testing.T, h *harness, who countersign.Identity, auth *passkeytest.Authenticator) string {
	t.Helper()
	ctx := context.Background()
	link, err := h.engine.CreatePasskeyEnrollment(ctx, tBob, who.Actor)
	if err != nil {
		t.Fatalf("enrollment link for %s: %v", who.Actor, err)
	}
	token, ok := strings.CutPrefix(link.URL, stepUpURL+"/passkeys/enroll/")
	if !ok || len(token) < 43 {
		t.Fatalf("link %q: want a token of 256 bits under the public URL", link.URL)
	}
	c, err := h.engine.BeginPasskeyEnrollment(ctx, who, token)
	if err != nil {
		t.Fatalf("begin enrollment of %s: %v", who.Actor, err)
	}
	body, err := auth.Create(c.Options)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.engine.FinishPasskeyRegistration(ctx, who, "laptop", body); err != nil {
		t.Fatalf("enrol %s: %v", who.Actor, err)
	}
	return token
}

// assertFor has who's authenticator answer a step-up challenge for p.
func assertFor(t *testing.T, h *harness, who countersign.Identity, auth *passkeytest.Authenticator, proposalID string) []byte {
	t.Helper()
	c, err := h.engine.StepUpChallenge(context.Background(), who, proposalID, "api")
	if err != nil {
		t.Fatalf("step-up challenge for %s: %v", who.Actor, err)
	}
	body, err := auth.Get(c.Options)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func TestStepUp(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		h := stepUpHarness(t, open)
		ctx := context.Background()
		bobKey, carolKey := passkeytest.New(stepUpURL), passkeytest.New(stepUpURL)
		enrolPasskey(t, h, tBob, bobKey)
		enrolPasskey(t, h, tCarol, carolKey)

		p := h.call(refundCall("c1", countersign.ModeIndependent, `{"amount":20000,"customer":"c1"}`)).Proposal
		q := h.call(refundCall("c2", countersign.ModeIndependent, `{"amount":30000,"customer":"c2"}`)).Proposal
		if p.StepUp != countersign.StepUpPasskey {
			t.Fatalf("proposal step-up %q, want passkey", p.StepUp)
		}

		// Without an assertion: refused, with the proposal's inbox page.
		_, err := h.engine.Decide(ctx, &countersign.Decision{Identity: tBob, ProposalID: p.ID, Verdict: countersign.Approve})
		var su *countersign.StepUpRequiredError
		if !errors.As(err, &su) || !errors.Is(err, countersign.ErrStepUpRequired) || su.URL != stepUpURL+"/proposals/"+p.ID {
			t.Fatalf("approve without an assertion: %v, want STEP_UP_REQUIRED with the inbox page", err)
		}
		// remember is refused outright, assertion or not.
		_, err = h.engine.Decide(ctx, &countersign.Decision{
			Identity: tBob, ProposalID: p.ID, Verdict: countersign.Approve, Remember: countersign.ScopeThread,
			Assertion: assertFor(t, h, tBob, bobKey, p.ID),
		})
		if !errors.Is(err, countersign.ErrInvalidRemember) {
			t.Fatalf("approve with remember: %v, want INVALID_REMEMBER", err)
		}

		// Bob's assertion for p.
		bobOnP := assertFor(t, h, tBob, bobKey, p.ID)
		// Carol presents it as hers: the challenge is bob's.
		_, err = h.engine.Decide(ctx, &countersign.Decision{Identity: tCarol, ProposalID: p.ID, Verdict: countersign.Approve, Assertion: bobOnP})
		if !errors.Is(err, countersign.ErrStepUpRequired) {
			t.Fatalf("carol with bob's assertion: %v, want refused", err)
		}
		// Bob presents it for q: it was made for p.
		_, err = h.engine.Decide(ctx, &countersign.Decision{Identity: tBob, ProposalID: q.ID, Verdict: countersign.Approve, Assertion: bobOnP})
		if !errors.Is(err, countersign.ErrStepUpRequired) {
			t.Fatalf("bob's assertion for p on q: %v, want refused", err)
		}
		// Neither refusal spent it: bob approves p with it.
		res, err := h.engine.Decide(ctx, &countersign.Decision{Identity: tBob, ProposalID: p.ID, Verdict: countersign.Approve, Assertion: bobOnP})
		if err != nil || res.Status != countersign.DecideApplied || res.Proposal.Status != cstype.StatusPending {
			t.Fatalf("bob approves p: %+v, %v; want applied, still pending (quorum 2)", res, err)
		}
		if d := res.Proposal.Decisions[0]; d.StepUp != countersign.StepUpPasskey || d.Actor != "bob" {
			t.Errorf("decision %+v, want bob's with step-up passkey", d)
		}
		// Replayed: spent.
		_, err = h.engine.Decide(ctx, &countersign.Decision{Identity: tBob, ProposalID: p.ID, Verdict: countersign.Approve, Assertion: bobOnP})
		if !errors.Is(err, countersign.ErrStepUpRequired) {
			t.Fatalf("bob's assertion again: %v, want refused", err)
		}
		// A malformed one decides nothing either.
		for _, junk := range []string{`{}`, `null`, `"x"`, `{"id":"AA","rawId":"AA","type":"public-key","response":{"clientDataJSON":"e30"}}`} {
			_, err = h.engine.Decide(ctx, &countersign.Decision{Identity: tCarol, ProposalID: p.ID, Verdict: countersign.Approve, Assertion: []byte(junk)})
			if !errors.Is(err, countersign.ErrStepUpRequired) {
				t.Errorf("assertion %s: %v, want refused", junk, err)
			}
		}
		// Carol's own completes the quorum: each approval its own.
		res, err = h.engine.Decide(ctx, &countersign.Decision{Identity: tCarol, ProposalID: p.ID, Verdict: countersign.Approve,
			Assertion: assertFor(t, h, tCarol, carolKey, p.ID)})
		if err != nil || res.Proposal.Status != cstype.StatusApproved {
			t.Fatalf("carol approves p: %+v, %v; want approved", res, err)
		}
		for _, d := range res.Proposal.Decisions {
			if d.StepUp != countersign.StepUpPasskey {
				t.Errorf("decision %+v: want step-up passkey", d)
			}
		}
		// No challenge for a proposal that no longer waits for you.
		if _, err := h.engine.StepUpChallenge(ctx, tCarol, p.ID, "api"); !errors.Is(err, countersign.ErrForbidden) {
			t.Errorf("challenge for a decided proposal: %v, want forbidden", err)
		}
		// Rejections need none.
		res, err = h.engine.Decide(ctx, &countersign.Decision{Identity: tCarol, ProposalID: q.ID, Verdict: countersign.Reject})
		if err != nil || res.Proposal.Status != cstype.StatusRejected || res.Proposal.Decisions[0].StepUp != "" {
			t.Fatalf("carol rejects q: %+v, %v", res, err)
		}
		// An agent credential is refused before anything is looked up.
		agent := tBob
		agent.Kind = countersign.KindAgent
		if _, err := h.engine.StepUpChallenge(ctx, agent, p.ID, "api"); !errors.Is(err, countersign.ErrAgentCannotDecide) {
			t.Errorf("an agent's challenge: %v, want AGENT_CANNOT_DECIDE", err)
		}
	})
}

func TestPasskeyEnrollment(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		h := stepUpHarness(t, open)
		ctx := context.Background()
		agentBob := tBob
		agentBob.Kind = countersign.KindAgent

		// Only a person with the operator role makes links.
		if _, err := h.engine.CreatePasskeyEnrollment(ctx, tCarol, "carol"); !errors.Is(err, countersign.ErrForbidden) {
			t.Errorf("carol (no operator) makes a link: %v, want forbidden", err)
		}
		if _, err := h.engine.CreatePasskeyEnrollment(ctx, agentBob, "carol"); !errors.Is(err, countersign.ErrAgentCannotDecide) {
			t.Errorf("an agent makes a link: %v, want AGENT_CANNOT_DECIDE", err)
		}
		carolKey := passkeytest.New(stepUpURL)
		token := enrolPasskey(t, h, tCarol, carolKey)
		// The link is spent.
		if _, err := h.engine.BeginPasskeyEnrollment(ctx, tCarol, token); !errors.Is(err, countersign.ErrPasskeyLink) {
			t.Errorf("the link again: %v, want refused", err)
		}
		// Someone else's link, an agent, a forged token.
		link, err := h.engine.CreatePasskeyEnrollment(ctx, tBob, "dave")
		if err != nil {
			t.Fatal(err)
		}
		daveToken := link.URL[strings.LastIndex(link.URL, "/")+1:]
		if _, err := h.engine.BeginPasskeyEnrollment(ctx, tCarol, daveToken); !errors.Is(err, countersign.ErrPasskeyLink) {
			t.Errorf("carol with dave's link: %v, want refused", err)
		}
		agentDave := tDave
		agentDave.Kind = countersign.KindAgent
		if _, err := h.engine.BeginPasskeyEnrollment(ctx, agentDave, daveToken); !errors.Is(err, countersign.ErrAgentCannotDecide) {
			t.Errorf("dave's agent with dave's link: %v, want AGENT_CANNOT_DECIDE", err)
		}
		for _, forged := range []string{"", "x", strings.Repeat("A", 43), strings.Repeat("A", 5000)} {
			if _, err := h.engine.BeginPasskeyEnrollment(ctx, tDave, forged); !errors.Is(err, countersign.ErrPasskeyLink) {
				t.Errorf("token %.10q: %v, want refused", forged, err)
			}
		}
		// An expired link.
		h.clock.Advance(countersign.EnrollmentTTL)
		if _, err := h.engine.BeginPasskeyEnrollment(ctx, tDave, daveToken); !errors.Is(err, countersign.ErrPasskeyLink) {
			t.Errorf("an expired link: %v, want refused", err)
		}

		// A second passkey needs an assertion by the first.
		phone := passkeytest.New(stepUpURL)
		if _, err := h.engine.BeginPasskeyAddition(ctx, tCarol, []byte(`{}`)); !errors.Is(err, countersign.ErrPasskeyRefused) {
			t.Errorf("adding without an assertion: %v, want refused", err)
		}
		m, err := h.engine.ManagePasskeysChallenge(ctx, tCarol)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := carolKey.Get(m.Options)
		c, err := h.engine.BeginPasskeyAddition(ctx, tCarol, a)
		if err != nil {
			t.Fatalf("add with carol's assertion: %v", err)
		}
		if _, err := h.engine.BeginPasskeyAddition(ctx, tCarol, a); !errors.Is(err, countersign.ErrPasskeyRefused) {
			t.Errorf("the manage assertion again: %v, want refused", err)
		}
		body, _ := phone.Create(c.Options)
		if _, err := h.engine.FinishPasskeyRegistration(ctx, tCarol, "phone", body); err != nil {
			t.Fatalf("add the phone: %v", err)
		}
		ps, err := h.engine.Passkeys(ctx, tCarol)
		if err != nil || len(ps) != 2 || ps[0].Name != "laptop" || ps[1].Name != "phone" {
			t.Fatalf("carol's passkeys: %+v, %v", ps, err)
		}
		// Removing one needs an assertion too; the phone's own will do.
		m, _ = h.engine.ManagePasskeysChallenge(ctx, tCarol)
		a, _ = phone.Get(m.Options)
		if err := h.engine.RemovePasskey(ctx, tCarol, ps[0].ID, a); err != nil {
			t.Fatalf("remove the laptop: %v", err)
		}
		if ps, _ := h.engine.Passkeys(ctx, tCarol); len(ps) != 1 || ps[0].Name != "phone" {
			t.Errorf("after removal: %+v", ps)
		}

		// Each is an audit event of the tenant's chain.
		if err := storetest.SealAll(ctx, h.store, "test-sealer"); err != nil {
			t.Fatal(err)
		}
		chain, err := storetest.ReadChain(ctx, h.store, "acme")
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, ev := range chain {
			if strings.HasPrefix(string(ev.Type), "passkey.") {
				types = append(types, string(ev.Type)+" "+ev.Actor)
			}
		}
		want := []string{string(store.EventPasskeyEnrolled) + " carol", string(store.EventPasskeyAdded) + " carol", string(store.EventPasskeyRemoved) + " carol"}
		if strings.Join(types, ",") != strings.Join(want, ",") {
			t.Errorf("passkey events %q, want %q", types, want)
		}
	})
}

// TestPublicURLOnAnIPAddress: a public URL whose host is an IP address
// serves the channels' links (the engine starts, ProposalURL is built
// under it), but WebAuthn binds passkeys to domain names, so asking for a
// step-up challenge says why it cannot be had; a URL that is no URL is
// refused at New.
func TestPublicURLOnAnIPAddress(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{
		rules: []countersign.Rule{{Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"},
			StepUp: countersign.StepUpPasskey}},
		engineOpts: func(o *countersign.Options) { o.PublicURL = "http://127.0.0.1:8080" },
	})
	if got := h.engine.ProposalURL("prp_1"); got != "http://127.0.0.1:8080/proposals/prp_1" {
		t.Errorf("ProposalURL = %q", got)
	}
	_, err := h.engine.CreatePasskeyEnrollment(context.Background(), tBob, "carol")
	if !errors.Is(err, countersign.ErrInvalidCall) || !strings.Contains(err.Error(), "domain name") {
		t.Errorf("an enrollment link on an IP address: %v; want ErrInvalidCall saying passkeys need a domain name", err)
	}
	for _, bad := range []string{"countersign.acme.example", "ftp://x.example", "https://"} {
		if _, err := countersign.New(countersign.Options{Store: memstore.New(nil), PublicURL: bad}); err == nil {
			t.Errorf("New accepted PublicURL %q", bad)
		}
	}
}
