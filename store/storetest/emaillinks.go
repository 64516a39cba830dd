package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// linkHash returns a fresh token digest, as the email channel stores one.
func linkHash() string {
	d := sha256.Sum256([]byte(uniqueID("link")))
	return hex.EncodeToString(d[:])
}

// emailMessage returns the two links (approve, reject) of one message to
// actor about proposal, created now and expiring after ttl.
func emailMessage(proposal, actor, notification string, now time.Time, ttl time.Duration) []*store.EmailLink {
	var links []*store.EmailLink
	for _, v := range []store.Verdict{store.VerdictApproved, store.VerdictRejected} {
		links = append(links, &store.EmailLink{
			TokenSHA256: linkHash(), Tenant: tenant, ProposalID: proposal, Actor: actor, Verdict: v,
			NotificationID: notification, CreatedAt: now, ExpiresAt: now.Add(ttl),
		})
	}
	return links
}

func cloneLinks(links []*store.EmailLink) []*store.EmailLink {
	out := make([]*store.EmailLink, len(links))
	for i, l := range links {
		out[i] = l.Clone()
	}
	return out
}

func (fx *fixture) issueLinks(links []*store.EmailLink) *store.IssueEmailLinksResult {
	fx.t.Helper()
	res, err := fx.store.IssueEmailLinks(fx.ctx, &store.IssueEmailLinksParams{Links: cloneLinks(links)})
	if err != nil {
		fx.t.Fatalf("issue email links: %v", err)
	}
	return res
}

func (fx *fixture) getLink(tn, hash string) (*store.EmailLink, error) {
	return fx.store.GetEmailLink(fx.ctx, &store.GetEmailLinkParams{Tenant: tn, TokenSHA256: hash})
}

func (fx *fixture) mustGetLink(hash string) *store.EmailLink {
	fx.t.Helper()
	l, err := fx.getLink(tenant, hash)
	if err != nil {
		fx.t.Fatalf("get email link %s: %v", hash[:8], err)
	}
	return l
}

func (fx *fixture) spendLink(tn, hash string) (*store.EmailLink, error) {
	return fx.store.SpendEmailLink(fx.ctx, &store.SpendEmailLinkParams{Tenant: tn, TokenSHA256: hash})
}

func (fx *fixture) markSent(hashes ...string) {
	fx.t.Helper()
	if err := fx.store.MarkEmailLinksSent(fx.ctx, &store.MarkEmailLinksSentParams{Tenant: tenant, TokenSHA256s: hashes}); err != nil {
		fx.t.Fatalf("mark email links sent: %v", err)
	}
}

// requireNotLive requires err to be a refused spend of a link in the given
// condition ("spent", "retired", "expired").
func requireNotLive(t *testing.T, err error, why string) *store.EmailLink {
	t.Helper()
	nl, ok := store.IsEmailLinkNotLive(err)
	if !ok || !errors.Is(err, store.ErrConflict) {
		t.Fatalf("spend: %v, want a refusal (%s)", err, why)
	}
	l := nl.Link
	got := "expired"
	switch {
	case l.Spend != nil:
		got = "spent"
	case !l.RetiredAt.IsZero():
		got = "retired"
	}
	if got != why {
		t.Fatalf("spend refused as %s (%+v), want %s", got, l, why)
	}
	return l
}

func requireSameLink(t *testing.T, got, want *store.EmailLink) {
	t.Helper()
	if got == nil {
		t.Fatalf("email link %s: got none", want.TokenSHA256[:8])
	}
	if got.TokenSHA256 != want.TokenSHA256 || got.Tenant != want.Tenant || got.ProposalID != want.ProposalID ||
		got.Actor != want.Actor || got.Verdict != want.Verdict || got.NotificationID != want.NotificationID ||
		!got.CreatedAt.Equal(want.CreatedAt) || !got.ExpiresAt.Equal(want.ExpiresAt) {
		t.Errorf("email link differs:\n  got  %+v\n  want %+v", got, want)
	}
	if got.CreatedAt.Location() != time.UTC || got.ExpiresAt.Location() != time.UTC {
		t.Errorf("email link times %v, %v: want UTC", got.CreatedAt, got.ExpiresAt)
	}
}

func testEmailLinks(t *testing.T, newStore Factory) {
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		now := fx.clock.Now().Add(123456 * time.Microsecond)
		links := emailMessage("prop-1", approver, "ntf_1_email", now, 72*time.Hour)
		res := fx.issueLinks(links)
		if res.AlreadySent || res.Retired != 0 {
			t.Fatalf("first issue: %+v, want stored, nothing retired", res)
		}
		for _, want := range links {
			got := fx.mustGetLink(want.TokenSHA256)
			requireSameLink(t, got, want)
			if !got.SentAt.IsZero() || !got.RetiredAt.IsZero() || got.Spend != nil {
				t.Errorf("new link: sent %v, retired %v, spend %+v; want none", got.SentAt, got.RetiredAt, got.Spend)
			}
			if !got.Live(fx.clock.Now()) {
				t.Errorf("new link is not live")
			}
			// The store keeps its own copy.
			got.Actor = "mallory"
			requireSameLink(t, fx.mustGetLink(want.TokenSHA256), want)
		}
	})

	t.Run("ListAProposalsLinks", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		now := fx.clock.Now().Add(time.Millisecond)
		// carol's message comes first, then bob's and an escalation's to
		// bob; another proposal's and another tenant's are not listed.
		carol := emailMessage("prop-1", "carol", "ntf_1_email", now, time.Hour)
		bob := emailMessage("prop-1", "bob", "ntf_1_email", now.Add(time.Second), time.Hour)
		bobAgain := emailMessage("prop-1", "bob", "ntf_2_email", now.Add(2*time.Second), time.Hour)
		for _, m := range [][]*store.EmailLink{carol, bob, bobAgain, emailMessage("prop-2", "bob", "ntf_3_email", now, time.Hour)} {
			fx.issueLinks(m)
		}
		foreign := emailMessage("prop-1", "bob", "ntf_4_email", now, time.Hour)
		for _, l := range foreign {
			l.Tenant = otherTenant
		}
		fx.issueLinks(foreign)
		fx.markSent(carol[0].TokenSHA256, carol[1].TokenSHA256)
		if _, err := fx.spendLink(tenant, bob[1].TokenSHA256); err != nil {
			t.Fatalf("spend: %v", err)
		}
		got, err := fx.store.ListEmailLinks(fx.ctx, &store.ListEmailLinksParams{Tenant: tenant, ProposalID: "prop-1"})
		if err != nil {
			t.Fatalf("list email links: %v", err)
		}
		want := []*store.EmailLink{bob[0], bob[1], bobAgain[0], bobAgain[1], carol[0], carol[1]}
		if len(got) != len(want) {
			t.Fatalf("listed %d links, want %d", len(got), len(want))
		}
		for i := range want {
			requireSameLink(t, got[i], want[i])
		}
		for i, l := range got {
			sent := i >= 4
			if sent == l.SentAt.IsZero() {
				t.Errorf("link %d (%s): sent at %v, want sent %v", i, l.Actor, l.SentAt, sent)
			}
			spent := l.Actor == "bob"
			if spent != (l.Spend != nil) || (spent && l.Spend.TokenSHA256 != bob[1].TokenSHA256) {
				t.Errorf("link %d (%s): spend %+v, want bob's reject link's spend: %v", i, l.Actor, l.Spend, spent)
			}
		}
		// Another tenant sees its own link only; a proposal with none
		// lists none.
		if got, err := fx.store.ListEmailLinks(fx.ctx, &store.ListEmailLinksParams{Tenant: otherTenant, ProposalID: "prop-1"}); err != nil || len(got) != 2 {
			t.Errorf("another tenant's list: %d links, %v; want its own 2", len(got), err)
		}
		if got, err := fx.store.ListEmailLinks(fx.ctx, &store.ListEmailLinksParams{Tenant: tenant, ProposalID: "prop-9"}); err != nil || len(got) != 0 {
			t.Errorf("a proposal with no links: %d, %v", len(got), err)
		}
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		links := emailMessage("prop-1", approver, "ntf_1_email", fx.clock.Now(), time.Hour)
		fx.issueLinks(links)
		h := links[0].TokenSHA256
		for name, key := range map[string][2]string{
			"unknown":        {tenant, linkHash()},
			"another tenant": {otherTenant, h},
			"no tenant":      {"", h},
			"uppercase":      {tenant, "AB" + h[2:]},
			"short":          {tenant, h[:63]},
			"empty":          {tenant, ""},
			"the token":      {tenant, "not-a-hash"},
		} {
			if _, err := fx.getLink(key[0], key[1]); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s: get: %v, want not found", name, err)
			}
			if _, err := fx.spendLink(key[0], key[1]); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s: spend: %v, want not found", name, err)
			}
		}
		// The foreign spends spent nothing.
		if l := fx.mustGetLink(h); !l.Live(fx.clock.Now()) {
			t.Errorf("a refused spend touched the link: %+v", l)
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		now := fx.clock.Now()
		for name, edit := range map[string]func(ls []*store.EmailLink){
			"raw token":          func(ls []*store.EmailLink) { ls[0].TokenSHA256 = "the-token-itself" },
			"uppercase token":    func(ls []*store.EmailLink) { ls[0].TokenSHA256 = "AB" + ls[0].TokenSHA256[2:] },
			"same token":         func(ls []*store.EmailLink) { ls[1].TokenSHA256 = ls[0].TokenSHA256 },
			"no tenant":          func(ls []*store.EmailLink) { ls[0].Tenant, ls[1].Tenant = "", "" },
			"no proposal":        func(ls []*store.EmailLink) { ls[0].ProposalID, ls[1].ProposalID = "", "" },
			"no actor":           func(ls []*store.EmailLink) { ls[0].Actor, ls[1].Actor = "", "" },
			"no notification":    func(ls []*store.EmailLink) { ls[0].NotificationID, ls[1].NotificationID = "", "" },
			"two actors":         func(ls []*store.EmailLink) { ls[1].Actor = approver2 },
			"two proposals":      func(ls []*store.EmailLink) { ls[1].ProposalID = "prop-2" },
			"two tenants":        func(ls []*store.EmailLink) { ls[1].Tenant = otherTenant },
			"two notifications":  func(ls []*store.EmailLink) { ls[1].NotificationID = "ntf_2_email" },
			"same verdict":       func(ls []*store.EmailLink) { ls[1].Verdict = ls[0].Verdict },
			"no verdict":         func(ls []*store.EmailLink) { ls[0].Verdict = "" },
			"cancel verdict":     func(ls []*store.EmailLink) { ls[0].Verdict = "cancelled" },
			"no creation":        func(ls []*store.EmailLink) { ls[0].CreatedAt = time.Time{} },
			"expires at created": func(ls []*store.EmailLink) { ls[0].ExpiresAt = ls[0].CreatedAt },
			"already sent":       func(ls []*store.EmailLink) { ls[0].SentAt = now },
			"already retired":    func(ls []*store.EmailLink) { ls[0].RetiredAt = now },
			"already spent": func(ls []*store.EmailLink) {
				ls[0].Spend = &store.EmailLinkSpend{TokenSHA256: ls[0].TokenSHA256, Verdict: ls[0].Verdict, At: now}
			},
		} {
			links := emailMessage("prop-1", approver, "ntf_1_email", now, time.Hour)
			edit(links)
			_, err := fx.store.IssueEmailLinks(fx.ctx, &store.IssueEmailLinksParams{Links: links})
			if !errors.Is(err, store.ErrInvalidParams) {
				t.Errorf("%s: issue: %v, want invalid params", name, err)
			}
			for _, l := range links {
				if _, err := fx.getLink(tenant, l.TokenSHA256); !errors.Is(err, store.ErrNotFound) && l.TokenSHA256 != "the-token-itself" {
					t.Errorf("%s: a refused link was stored (%v)", name, err)
				}
			}
		}
		three := append(emailMessage("prop-1", approver, "ntf_1_email", now, time.Hour), emailMessage("prop-1", approver, "ntf_1_email", now, time.Hour)[0])
		for name, p := range map[string]*store.IssueEmailLinksParams{
			"none":  {},
			"nil":   {Links: []*store.EmailLink{nil}},
			"three": {Links: three},
		} {
			if _, err := fx.store.IssueEmailLinks(fx.ctx, p); !errors.Is(err, store.ErrInvalidParams) {
				t.Errorf("issue %s: %v, want invalid params", name, err)
			}
		}
		for name, p := range map[string]*store.MarkEmailLinksSentParams{
			"none":      {Tenant: tenant},
			"no tenant": {TokenSHA256s: []string{linkHash()}},
			"raw token": {Tenant: tenant, TokenSHA256s: []string{"token"}},
			"three":     {Tenant: tenant, TokenSHA256s: []string{linkHash(), linkHash(), linkHash()}},
		} {
			if err := fx.store.MarkEmailLinksSent(fx.ctx, p); !errors.Is(err, store.ErrInvalidParams) {
				t.Errorf("mark sent %s: %v, want invalid params", name, err)
			}
		}
	})

	t.Run("DuplicateToken", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		first := emailMessage("prop-1", approver, "ntf_1_email", fx.clock.Now(), time.Hour)
		fx.issueLinks(first)
		second := emailMessage("prop-2", approver2, "ntf_2_email", fx.clock.Now(), time.Hour)
		second[1].TokenSHA256 = first[0].TokenSHA256
		if _, err := fx.store.IssueEmailLinks(fx.ctx, &store.IssueEmailLinksParams{Links: second}); !errors.Is(err, store.ErrInvalidParams) {
			t.Fatalf("issue with a taken token: %v, want invalid params", err)
		}
		// Nothing of the refused message was stored, and the first stands.
		if _, err := fx.getLink(tenant, second[0].TokenSHA256); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the refused message's other link was stored (%v)", err)
		}
		requireSameLink(t, fx.mustGetLink(first[0].TokenSHA256), first[0])
	})

	t.Run("SpendSpendsTheApproversLinks", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		now := fx.clock.Now()
		mine := emailMessage("prop-1", approver, "ntf_1_email", now, time.Hour)
		// An escalation mailed the same approver again: those links are
		// that approver's for the proposal too.
		escalated := emailMessage("prop-1", approver, "ntf_2_email", now, time.Hour)
		carols := emailMessage("prop-1", approver2, "ntf_1_email", now, time.Hour)
		otherProposal := emailMessage("prop-2", approver, "ntf_3_email", now, time.Hour)
		for _, m := range [][]*store.EmailLink{mine, escalated, carols, otherProposal} {
			fx.issueLinks(m)
		}
		fx.clock.Advance(time.Minute)
		spent, err := fx.spendLink(tenant, mine[0].TokenSHA256)
		if err != nil {
			t.Fatalf("spend: %v", err)
		}
		requireSameLink(t, spent, mine[0])
		wantSpend := store.EmailLinkSpend{TokenSHA256: mine[0].TokenSHA256, Verdict: store.VerdictApproved, At: fx.clock.Now()}
		if spent.Spend == nil || spent.Spend.TokenSHA256 != wantSpend.TokenSHA256 ||
			spent.Spend.Verdict != wantSpend.Verdict || !spent.Spend.At.Equal(wantSpend.At) {
			t.Fatalf("spend returned %+v, want %+v", spent.Spend, wantSpend)
		}
		for _, l := range append(append([]*store.EmailLink{}, mine...), escalated...) {
			got := fx.mustGetLink(l.TokenSHA256)
			if got.Spend == nil || got.Spend.TokenSHA256 != mine[0].TokenSHA256 || got.Spend.Verdict != store.VerdictApproved ||
				!got.Spend.At.Equal(wantSpend.At) || got.Spend.At.Location() != time.UTC {
				t.Errorf("link %s (%s, %s): spend %+v, want %+v", l.TokenSHA256[:8], l.NotificationID, l.Verdict, got.Spend, wantSpend)
			}
			if got.Live(fx.clock.Now()) {
				t.Errorf("link %s is still live", l.TokenSHA256[:8])
			}
			got = requireNotLive(t, func() error { _, err := fx.spendLink(tenant, l.TokenSHA256); return err }(), "spent")
			requireSameLink(t, got, l)
		}
		// Another approver's links, and the approver's for another
		// proposal, are not touched.
		for _, l := range append(append([]*store.EmailLink{}, carols...), otherProposal...) {
			if got := fx.mustGetLink(l.TokenSHA256); !got.Live(fx.clock.Now()) {
				t.Errorf("link %s of %s for %s: %+v, want live", l.TokenSHA256[:8], l.Actor, l.ProposalID, got)
			}
		}
		if _, err := fx.spendLink(tenant, carols[1].TokenSHA256); err != nil {
			t.Errorf("carol's reject link: %v", err)
		}
	})

	t.Run("Expired", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		links := emailMessage("prop-1", approver, "ntf_1_email", fx.clock.Now(), time.Minute)
		fx.issueLinks(links)
		fx.clock.Advance(time.Minute)
		// ExpiresAt itself is past: a link is live before it, not at it.
		got := requireNotLive(t, func() error { _, err := fx.spendLink(tenant, links[0].TokenSHA256); return err }(), "expired")
		requireSameLink(t, got, links[0])
		if l := fx.mustGetLink(links[1].TokenSHA256); l.Spend != nil {
			t.Errorf("a refused spend spent the sibling: %+v", l.Spend)
		}
	})

	t.Run("RetriedDelivery", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		now := fx.clock.Now()
		first := emailMessage("prop-1", approver, "ntf_1_email", now, time.Hour)
		carols := emailMessage("prop-1", approver2, "ntf_1_email", now, time.Hour)
		earlier := emailMessage("prop-1", approver, "ntf_0_email", now, time.Hour)
		fx.issueLinks(first)
		fx.issueLinks(carols)
		fx.issueLinks(earlier)
		fx.markSent(earlier[0].TokenSHA256, earlier[1].TokenSHA256)

		// The first attempt failed before bob's message was sent: the
		// second mints new links and retires the unsent ones.
		fx.clock.Advance(time.Second)
		second := emailMessage("prop-1", approver, "ntf_1_email", fx.clock.Now(), time.Hour)
		if res := fx.issueLinks(second); res.AlreadySent || res.Retired != 2 {
			t.Fatalf("second attempt: %+v, want stored with 2 retired", res)
		}
		for _, l := range first {
			got := fx.mustGetLink(l.TokenSHA256)
			if !got.RetiredAt.Equal(fx.clock.Now()) {
				t.Errorf("first attempt's %s link: retired at %v, want %v", l.Verdict, got.RetiredAt, fx.clock.Now())
			}
			requireNotLive(t, func() error { _, err := fx.spendLink(tenant, l.TokenSHA256); return err }(), "retired")
		}
		// Carol's links of the same notification, and bob's sent links of
		// an earlier one, stand.
		for _, l := range append(append([]*store.EmailLink{}, carols...), earlier...) {
			if got := fx.mustGetLink(l.TokenSHA256); !got.Live(fx.clock.Now()) {
				t.Errorf("%s's link of %s: %+v, want live", l.Actor, l.NotificationID, got)
			}
		}

		// The second attempt's message was sent: a third attempt (the
		// outbox retried for carol's sake) stores nothing for bob.
		fx.clock.Advance(time.Second)
		sentAt := fx.clock.Now()
		fx.markSent(second[0].TokenSHA256, second[1].TokenSHA256)
		fx.clock.Advance(time.Second)
		fx.markSent(second[0].TokenSHA256) // again: the first time stands
		third := emailMessage("prop-1", approver, "ntf_1_email", fx.clock.Now(), time.Hour)
		if res := fx.issueLinks(third); !res.AlreadySent || res.Retired != 0 {
			t.Fatalf("third attempt: %+v, want already sent", res)
		}
		for _, l := range third {
			if _, err := fx.getLink(tenant, l.TokenSHA256); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("the third attempt's %s link was stored (%v)", l.Verdict, err)
			}
		}
		for _, l := range second {
			got := fx.mustGetLink(l.TokenSHA256)
			if !got.SentAt.Equal(sentAt) || !got.RetiredAt.IsZero() || !got.Live(fx.clock.Now()) {
				t.Errorf("second attempt's %s link: sent %v (want %v), retired %v, live %v", l.Verdict, got.SentAt, sentAt, got.RetiredAt, got.Live(fx.clock.Now()))
			}
		}
		// A spent link is never retired: spending is final.
		if _, err := fx.spendLink(tenant, carols[0].TokenSHA256); err != nil {
			t.Fatal(err)
		}
		again := emailMessage("prop-1", approver2, "ntf_1_email", fx.clock.Now(), time.Hour)
		if res := fx.issueLinks(again); res.Retired != 0 {
			t.Errorf("issue after a spend retired %d links, want 0", res.Retired)
		}
		if got := fx.mustGetLink(carols[1].TokenSHA256); !got.RetiredAt.IsZero() || got.Spend == nil {
			t.Errorf("carol's spent link: %+v, want spent, not retired", got)
		}
	})

	t.Run("MarkSentIsTheTenants", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		links := emailMessage("prop-1", approver, "ntf_1_email", fx.clock.Now(), time.Hour)
		fx.issueLinks(links)
		err := fx.store.MarkEmailLinksSent(fx.ctx, &store.MarkEmailLinksSentParams{Tenant: otherTenant, TokenSHA256s: []string{links[0].TokenSHA256, linkHash()}})
		if err != nil {
			t.Fatalf("mark another tenant's: %v", err)
		}
		if got := fx.mustGetLink(links[0].TokenSHA256); !got.SentAt.IsZero() {
			t.Errorf("another tenant marked the link sent at %v", got.SentAt)
		}
	})

	t.Run("RaceOneSpendWins", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		const rounds, perLink = 5, 4
		for range rounds {
			links := emailMessage(uniqueID("prop"), approver, "ntf_1_email", fx.clock.Now(), time.Hour)
			fx.issueLinks(links)
			var (
				wg     sync.WaitGroup
				mu     sync.Mutex
				wins   []*store.EmailLink
				others []error
			)
			start := make(chan struct{})
			for i := range 2 * perLink {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					l, err := fx.spendLink(tenant, links[i%2].TokenSHA256)
					mu.Lock()
					defer mu.Unlock()
					if err == nil {
						wins = append(wins, l)
					} else {
						others = append(others, err)
					}
				}()
			}
			close(start)
			wg.Wait()
			if len(wins) != 1 {
				t.Fatalf("%d spends of one approver's two links won, want exactly 1", len(wins))
			}
			for _, err := range others {
				l := requireNotLive(t, err, "spent")
				if l.Spend.TokenSHA256 != wins[0].TokenSHA256 || l.Spend.Verdict != wins[0].Verdict {
					t.Errorf("a loser saw spend %+v, the winner was %s (%s)", l.Spend, wins[0].TokenSHA256[:8], wins[0].Verdict)
				}
			}
			for _, l := range links {
				got := fx.mustGetLink(l.TokenSHA256)
				if got.Spend == nil || got.Spend.TokenSHA256 != wins[0].TokenSHA256 {
					t.Errorf("link %s: spend %+v, want the winner's", l.Verdict, got.Spend)
				}
			}
		}
	})
}
