package web_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/countersign/countersign"
)

// TestAnnouncedAndViaInChromium: the proposal page says where the proposal
// was announced (Slack: a direct message posted to bob, one to carol still
// being posted; Email: a mail to carol) and through which channel each
// decision came ("bob approved via Slack"), from what the engine keeps of
// the channels' messages. A proposal announced nowhere shows no such list.
func TestAnnouncedAndViaInChromium(t *testing.T) {
	h := newHarness(t)
	ctx := t.Context()
	id := h.propose("t_announced", "c_ann", 12)
	quiet := h.propose("t_quiet", "c_quiet", 13)
	p, err := h.engine.Proposal(ctx, countersign.Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance"}}, id)
	if err != nil {
		t.Fatal(err)
	}
	bob := countersign.Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance"}, Kind: countersign.KindHuman}
	carol := countersign.Identity{Tenant: "acme", Actor: "carol", Roles: []string{"finance"}, Kind: countersign.KindHuman}
	// What the channels do: Slack posts bob's message, and carol's is
	// claimed but not posted yet; carol's mail is sent.
	claim, err := h.engine.ClaimSlackPost(ctx, p, bob, "U0BOB", time.Hour)
	if err != nil || !claim.Claimed {
		t.Fatalf("claim bob's post: %+v %v", claim, err)
	}
	if _, err := h.engine.RecordSlackPost(ctx, claim.Announcement, "D0BOB", "1700000000.000001"); err != nil {
		t.Fatal(err)
	}
	if c, err := h.engine.ClaimSlackPost(ctx, p, carol, "U0CAROL", time.Hour); err != nil || !c.Claimed {
		t.Fatalf("claim carol's post: %+v %v", c, err)
	}
	links, err := h.engine.IssueEmailLinks(ctx, &countersign.EmailLinkIssue{Tenant: "acme", ProposalID: id, Approver: carol,
		NotificationID: "ntf_announced", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.engine.MarkEmailLinksSent(ctx, "acme", links.Tokens[countersign.Approve], links.Tokens[countersign.Reject]); err != nil {
		t.Fatal(err)
	}
	// bob approves in Slack.
	if _, err := h.engine.Decide(ctx, &countersign.Decision{Identity: bob, ProposalID: id, Verdict: countersign.Approve, Via: countersign.ViaSlack}); err != nil {
		t.Fatal(err)
	}

	b := browser(t)
	signInBrowser(t, b, h.url, "key_carol")
	step(t, b, "open the announced proposal", chromedp.Navigate(h.url+"/proposals/"+id))
	waitFor(t, b, "the announcements", `!!document.querySelector("#announced")`)
	if got, want := eval[string](t, b, `document.querySelector("#announced").textContent`),
		"Slack: bob (direct message), carol (direct message, posting) · Email: carol"; got != want {
		t.Errorf("the announcements read %q, want %q", got, want)
	}
	if got := eval[string](t, b, `document.querySelector("ol.history li").innerText`); !strings.HasPrefix(got, "bob approved via Slack at ") {
		t.Errorf("the decision reads %q, want it to start %q", got, "bob approved via Slack at ")
	}
	step(t, b, "open the proposal announced nowhere", chromedp.Navigate(h.url+"/proposals/"+quiet))
	waitFor(t, b, "the quiet proposal's page", `!!document.querySelector("#approve")`)
	if eval[bool](t, b, `!!document.querySelector("#announced")`) {
		t.Error("a proposal announced nowhere shows an Announced list")
	}
}
