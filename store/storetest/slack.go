package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// The Slack announcements (store/slack.go): one per proposal and actor,
// claimed under a lease before it is posted, recorded with the claim's
// token, and a nonce replaced only by compare-and-set.

const slackPost = "" // the configured channel's post has no actor

func (fx *fixture) slackClaim(proposalID, actor, nonce, token string, version int64, lease time.Duration) *store.SlackPostClaim {
	fx.t.Helper()
	user := ""
	if actor != slackPost {
		user = "U" + actor
	}
	c, err := fx.store.ClaimSlackPost(fx.ctx, &store.ClaimSlackPostParams{Tenant: tenant, ProposalID: proposalID, Actor: actor,
		SlackUser: user, Nonce: nonce, NonceVersion: version, Token: token, LeaseDuration: lease})
	if err != nil {
		fx.t.Fatalf("ClaimSlackPost(%s, %q): %v", proposalID, actor, err)
	}
	if c == nil || c.Announcement == nil {
		fx.t.Fatalf("ClaimSlackPost(%s, %q): no announcement", proposalID, actor)
	}
	return c
}

func (fx *fixture) slackRecord(proposalID, actor, token, channel, ts string) (*store.SlackAnnouncement, error) {
	return fx.store.RecordSlackPost(fx.ctx, &store.RecordSlackPostParams{Tenant: tenant, ProposalID: proposalID, Actor: actor,
		Token: token, Channel: channel, TS: ts})
}

func (fx *fixture) slackGet(proposalID, actor string) (*store.SlackAnnouncement, error) {
	return fx.store.GetSlackAnnouncement(fx.ctx, &store.GetSlackAnnouncementParams{Tenant: tenant, ProposalID: proposalID, Actor: actor})
}

func requireSlackAnnouncement(t *testing.T, got *store.SlackAnnouncement, want store.SlackAnnouncement) {
	t.Helper()
	if got == nil {
		t.Fatal("announcement: got none")
	}
	if got.Tenant != want.Tenant || got.ProposalID != want.ProposalID || got.Actor != want.Actor || got.SlackUser != want.SlackUser ||
		got.Channel != want.Channel || got.TS != want.TS || got.Nonce != want.Nonce || got.NonceVersion != want.NonceVersion ||
		got.PostToken != want.PostToken || !got.PostUntil.Equal(want.PostUntil) {
		t.Errorf("announcement differs:\n  got  %+v\n  want %+v", *got, want)
	}
	for name, at := range map[string]time.Time{"created": got.CreatedAt, "updated": got.UpdatedAt, "post until": got.PostUntil} {
		if !at.IsZero() && at.Location() != time.UTC {
			t.Errorf("%s at %v: want UTC", name, at)
		}
	}
	if got.CreatedAt.IsZero() || got.UpdatedAt.Before(got.CreatedAt) {
		t.Errorf("created %v, updated %v: want a creation time, not after the update", got.CreatedAt, got.UpdatedAt)
	}
}

func testSlackAnnouncements(t *testing.T, newStore Factory) {
	t.Run("ClaimRecordRead", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		now := fx.clock.Now()
		c := fx.slackClaim("prp_1", approver, "n1", "tok1", 1, time.Minute)
		if !c.Claimed {
			t.Fatal("the first claim was not granted")
		}
		want := store.SlackAnnouncement{Tenant: tenant, ProposalID: "prp_1", Actor: approver, SlackUser: "U" + approver,
			Nonce: "n1", NonceVersion: 1, PostToken: "tok1", PostUntil: now.Add(time.Minute)}
		requireSlackAnnouncement(t, c.Announcement, want)
		if c.Announcement.Posted() {
			t.Error("a claimed announcement reads as posted")
		}
		got, err := fx.slackGet("prp_1", approver)
		if err != nil {
			t.Fatal(err)
		}
		requireSlackAnnouncement(t, got, want)

		fx.clock.Advance(time.Second)
		rec, err := fx.slackRecord("prp_1", approver, "tok1", "D0BOB", "1700000000.000100")
		if err != nil {
			t.Fatalf("record: %v", err)
		}
		want.Channel, want.TS, want.PostToken, want.PostUntil = "D0BOB", "1700000000.000100", "", time.Time{}
		requireSlackAnnouncement(t, rec, want)
		if !rec.Posted() || !rec.UpdatedAt.Equal(now.Add(time.Second)) {
			t.Errorf("posted %v, updated at %v; want posted, updated at %v", rec.Posted(), rec.UpdatedAt, now.Add(time.Second))
		}
		got, err = fx.slackGet("prp_1", approver)
		if err != nil {
			t.Fatal(err)
		}
		requireSlackAnnouncement(t, got, want)

		// The store keeps its own copy.
		got.Nonce = "mallory"
		again, err := fx.slackGet("prp_1", approver)
		if err != nil || again.Nonce != "n1" {
			t.Errorf("after editing a read copy: nonce %q, %v; want n1", again.Nonce, err)
		}
	})

	t.Run("ClaimOncePerActor", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		first := fx.slackClaim("prp_1", approver, "n1", "tok1", 1, time.Minute)
		// Another delivery while the post is under way: not granted, and
		// nothing of the claim changes.
		busy := fx.slackClaim("prp_1", approver, "n2", "tok2", 2, time.Minute)
		if busy.Claimed || busy.Announcement.Nonce != "n1" || busy.Announcement.PostToken != "tok1" {
			t.Errorf("claim during a running claim: claimed %v, nonce %q, token %q; want not claimed, n1, tok1",
				busy.Claimed, busy.Announcement.Nonce, busy.Announcement.PostToken)
		}
		if _, err := fx.slackRecord("prp_1", approver, "tok1", "D0BOB", "1.0001"); err != nil {
			t.Fatal(err)
		}
		// Posted: a retried delivery never posts twice, however late.
		fx.clock.Advance(time.Hour)
		posted := fx.slackClaim("prp_1", approver, "n3", "tok3", 3, time.Minute)
		if posted.Claimed || posted.Announcement.TS != "1.0001" || posted.Announcement.Nonce != "n1" {
			t.Errorf("claim of a posted announcement: claimed %v, %+v; want not claimed, as posted", posted.Claimed, *posted.Announcement)
		}
		// Another actor, the channel's post and another proposal are
		// announcements of their own.
		for _, c := range []struct{ proposal, actor string }{{"prp_1", approver2}, {"prp_1", slackPost}, {"prp_2", approver}} {
			if got := fx.slackClaim(c.proposal, c.actor, "n", "t", 1, time.Minute); !got.Claimed {
				t.Errorf("claim of %s to %q: not granted", c.proposal, c.actor)
			}
		}
		if first.Announcement.Nonce != "n1" {
			t.Errorf("the first claim's copy changed: %+v", *first.Announcement)
		}
	})

	t.Run("TakeOver", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		fx.slackClaim("prp_1", approver, "n1", "tok1", 1, time.Minute)
		fx.clock.Advance(time.Minute) // the lease ends at now: run out
		now := fx.clock.Now()
		c := fx.slackClaim("prp_1", approver, "n2", "tok2", 3, time.Minute)
		if !c.Claimed {
			t.Fatal("a claim whose lease ran out was not taken over")
		}
		requireSlackAnnouncement(t, c.Announcement, store.SlackAnnouncement{Tenant: tenant, ProposalID: "prp_1", Actor: approver,
			SlackUser: "U" + approver, Nonce: "n2", NonceVersion: 3, PostToken: "tok2", PostUntil: now.Add(time.Minute)})
		// The first claimer's answer came late: it records nothing.
		_, err := fx.slackRecord("prp_1", approver, "tok1", "D0BOB", "1.0001")
		if !errors.Is(err, store.ErrConflict) || !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("record with a taken-over claim: %v, want a conflict, lease lost", err)
		}
		rec, err := fx.slackRecord("prp_1", approver, "tok2", "D0BOB", "1.0002")
		if err != nil || rec.TS != "1.0002" || rec.Nonce != "n2" {
			t.Fatalf("record by the new claimer: %+v, %v", rec, err)
		}
		// Posted: recording again is refused, whoever asks.
		for _, tok := range []string{"tok2", "tok1"} {
			if _, err := fx.slackRecord("prp_1", approver, tok, "D0BOB", "1.0003"); !errors.Is(err, store.ErrConflict) {
				t.Errorf("record of a posted announcement with %s: %v, want a conflict", tok, err)
			}
		}
		got, err := fx.slackGet("prp_1", approver)
		if err != nil || got.TS != "1.0002" {
			t.Errorf("after refused records: %+v, %v; want ts 1.0002", got, err)
		}
		if _, err := fx.slackRecord("prp_9", approver, "tok", "D0BOB", "1.0001"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("record of an announcement never claimed: %v, want not found", err)
		}
	})

	t.Run("RotateNonce", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		fx.slackClaim("prp_1", approver, "n1", "tok1", 2, time.Minute)
		if _, err := fx.slackRecord("prp_1", approver, "tok1", "D0BOB", "1.0001"); err != nil {
			t.Fatal(err)
		}
		rotate := func(from, nonce string, version int64) (*store.SlackAnnouncement, error) {
			return fx.store.RotateSlackNonce(fx.ctx, &store.RotateSlackNonceParams{Tenant: tenant, ProposalID: "prp_1",
				Actor: approver, From: from, Nonce: nonce, NonceVersion: version})
		}
		got, err := rotate("n1", "n2", 3)
		if err != nil || got.Nonce != "n2" || got.NonceVersion != 3 || got.PrevNonce != "n1" || got.TS != "1.0001" {
			t.Fatalf("rotate: %+v, %v; want nonce n2 of version 3 after n1, still posted", got, err)
		}
		retire := func(nonce string) error {
			return fx.store.RetireSlackNonce(fx.ctx, &store.RetireSlackNonceParams{Tenant: tenant, ProposalID: "prp_1", Actor: approver, Nonce: nonce})
		}
		// Retiring for a nonce the announcement no longer has changes
		// nothing: the previous nonce stays until its own update lands.
		if err := retire("n1"); err != nil {
			t.Fatal(err)
		}
		if got, err := fx.slackGet("prp_1", approver); err != nil || got.PrevNonce != "n1" {
			t.Fatalf("after retiring another nonce: %+v, %v; want n1 still the previous", got, err)
		}
		for range 2 { // twice: the second finds nothing to retire
			if err := retire("n2"); err != nil {
				t.Fatal(err)
			}
			if got, err := fx.slackGet("prp_1", approver); err != nil || got.PrevNonce != "" || got.Nonce != "n2" {
				t.Fatalf("after retiring n1 behind n2: %+v, %v; want no previous nonce", got, err)
			}
		}
		if err := fx.store.RetireSlackNonce(fx.ctx, &store.RetireSlackNonceParams{Tenant: otherTenant, ProposalID: "prp_1",
			Actor: approver, Nonce: "n2"}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("retire another tenant's: %v, want not found", err)
		}
		for name, try := range map[string]func() (*store.SlackAnnouncement, error){
			"from a stale nonce":    func() (*store.SlackAnnouncement, error) { return rotate("n1", "n3", 4) },
			"to an earlier version": func() (*store.SlackAnnouncement, error) { return rotate("n2", "n3", 2) },
		} {
			if _, err := try(); !errors.Is(err, store.ErrConflict) {
				t.Errorf("rotate %s: %v, want a conflict", name, err)
			}
		}
		// The same version again is allowed: the rotation of one state, by
		// whichever delivery comes first.
		if got, err = rotate("n2", "n4", 3); err != nil || got.Nonce != "n4" || got.PrevNonce != "n2" {
			t.Errorf("rotate within a version: %+v, %v", got, err)
		}
		if _, err := fx.store.RotateSlackNonce(fx.ctx, &store.RotateSlackNonceParams{Tenant: otherTenant, ProposalID: "prp_1",
			Actor: approver, From: "n4", Nonce: "n5", NonceVersion: 9}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("rotate another tenant's: %v, want not found", err)
		}
		if got, err := fx.slackGet("prp_1", approver); err != nil || got.Nonce != "n4" {
			t.Errorf("after refused rotations: %+v, %v; want nonce n4", got, err)
		}
	})

	t.Run("ListAndTenants", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		for _, actor := range []string{approver2, slackPost, approver} {
			fx.slackClaim("prp_1", actor, "n-"+actor, "tok-"+actor, 1, time.Minute)
		}
		fx.slackClaim("prp_2", approver, "n", "t", 1, time.Minute)
		list, err := fx.store.ListSlackAnnouncements(fx.ctx, &store.ListSlackAnnouncementsParams{Tenant: tenant, ProposalID: "prp_1"})
		if err != nil {
			t.Fatal(err)
		}
		var actors []string
		for _, a := range list {
			actors = append(actors, a.Actor)
			if a.ProposalID != "prp_1" || a.Nonce != "n-"+a.Actor {
				t.Errorf("listed %+v", *a)
			}
		}
		if fmt.Sprint(actors) != fmt.Sprint([]string{slackPost, approver, approver2}) {
			t.Errorf("listed actors %q, want the channel's post, then bob, carol", actors)
		}
		other, err := fx.store.ListSlackAnnouncements(fx.ctx, &store.ListSlackAnnouncementsParams{Tenant: otherTenant, ProposalID: "prp_1"})
		if err != nil || len(other) != 0 {
			t.Errorf("another tenant lists %d, %v; want none", len(other), err)
		}
		if _, err := fx.store.GetSlackAnnouncement(fx.ctx, &store.GetSlackAnnouncementParams{Tenant: otherTenant, ProposalID: "prp_1",
			Actor: approver}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("another tenant gets %v, want not found", err)
		}
		if _, err := fx.slackGet("prp_1", "dave"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("an actor never announced to: %v, want not found", err)
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		valid := func() *store.ClaimSlackPostParams {
			return &store.ClaimSlackPostParams{Tenant: tenant, ProposalID: "prp_1", Actor: approver, SlackUser: "U1",
				Nonce: "n", Token: "t", LeaseDuration: time.Minute}
		}
		long := string(make([]byte, 256))
		for name, edit := range map[string]func(p *store.ClaimSlackPostParams){
			"no tenant":            func(p *store.ClaimSlackPostParams) { p.Tenant = "" },
			"no proposal":          func(p *store.ClaimSlackPostParams) { p.ProposalID = "" },
			"no nonce":             func(p *store.ClaimSlackPostParams) { p.Nonce = "" },
			"no token":             func(p *store.ClaimSlackPostParams) { p.Token = "" },
			"no lease":             func(p *store.ClaimSlackPostParams) { p.LeaseDuration = 0 },
			"negative version":     func(p *store.ClaimSlackPostParams) { p.NonceVersion = -1 },
			"an actor, no user":    func(p *store.ClaimSlackPostParams) { p.SlackUser = "" },
			"a channel with user":  func(p *store.ClaimSlackPostParams) { p.Actor = "" },
			"an overlong nonce":    func(p *store.ClaimSlackPostParams) { p.Nonce = long },
			"an overlong proposal": func(p *store.ClaimSlackPostParams) { p.ProposalID = long },
		} {
			p := valid()
			edit(p)
			if _, err := fx.store.ClaimSlackPost(fx.ctx, p); !errors.Is(err, store.ErrInvalidParams) {
				t.Errorf("claim with %s: %v, want invalid params", name, err)
			}
		}
		if _, err := fx.slackGet("prp_1", approver); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a refused claim was stored: %v", err)
		}
		fx.slackClaim("prp_1", approver, "n", "t", 1, time.Minute)
		for name, p := range map[string]*store.RecordSlackPostParams{
			"no channel": {Tenant: tenant, ProposalID: "prp_1", Actor: approver, Token: "t", TS: "1.1"},
			"no ts":      {Tenant: tenant, ProposalID: "prp_1", Actor: approver, Token: "t", Channel: "D1"},
			"no token":   {Tenant: tenant, ProposalID: "prp_1", Actor: approver, Channel: "D1", TS: "1.1"},
			"nil":        nil,
		} {
			if _, err := fx.store.RecordSlackPost(fx.ctx, p); !errors.Is(err, store.ErrInvalidParams) {
				t.Errorf("record with %s: %v, want invalid params", name, err)
			}
		}
		for name, p := range map[string]*store.RotateSlackNonceParams{
			"no from":  {Tenant: tenant, ProposalID: "prp_1", Actor: approver, Nonce: "m"},
			"no nonce": {Tenant: tenant, ProposalID: "prp_1", Actor: approver, From: "n"},
			"nil":      nil,
		} {
			if _, err := fx.store.RotateSlackNonce(fx.ctx, p); !errors.Is(err, store.ErrInvalidParams) {
				t.Errorf("rotate with %s: %v, want invalid params", name, err)
			}
		}
		if _, err := fx.store.ClaimSlackPost(fx.ctx, nil); !errors.Is(err, store.ErrInvalidParams) {
			t.Errorf("claim without params: %v, want invalid params", err)
		}
	})

	t.Run("Races", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		const n = 8
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			claimed []string
			rotated int
		)
		for i := range n {
			wg.Go(func() {
				token := fmt.Sprintf("tok%d", i)
				c, err := fx.store.ClaimSlackPost(fx.ctx, &store.ClaimSlackPostParams{Tenant: tenant, ProposalID: "prp_1", Actor: approver,
					SlackUser: "U1", Nonce: fmt.Sprintf("n%d", i), NonceVersion: 1, Token: token, LeaseDuration: time.Hour})
				if err != nil {
					t.Errorf("claim %d: %v", i, err)
					return
				}
				if c.Claimed {
					mu.Lock()
					claimed = append(claimed, token)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(claimed) != 1 {
			t.Fatalf("%d concurrent claims granted (%q), want exactly one", len(claimed), claimed)
		}
		rec, err := fx.slackRecord("prp_1", approver, claimed[0], "D1", "1.1")
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			wg.Go(func() {
				_, err := fx.store.RotateSlackNonce(fx.ctx, &store.RotateSlackNonceParams{Tenant: tenant, ProposalID: "prp_1",
					Actor: approver, From: rec.Nonce, Nonce: fmt.Sprintf("r%d", i), NonceVersion: 2})
				switch {
				case err == nil:
					mu.Lock()
					rotated++
					mu.Unlock()
				case !errors.Is(err, store.ErrConflict):
					t.Errorf("rotate %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		if rotated != 1 {
			t.Errorf("%d concurrent rotations from one nonce applied, want exactly one", rotated)
		}
	})
}
