package slack_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/channels/slack/slacktest"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/teststores"
)

// durable runs test on SQLite and PostgreSQL.
func durable(t *testing.T, test func(t *testing.T, open teststores.Opener)) {
	for name, open := range map[string]teststores.Opener{"sqlite": teststores.SQLite, "postgres": teststores.Postgres} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, open)
		})
	}
}

// A proposal is announced in a direct message to each approver who may
// decide it, never to its requester nor to a mapped person who may not;
// one approver's click decides it through the engine with via slack; every
// message is then updated, with no button left, and again when it settles.
// A second click on the old message decides nothing and says so.
func TestAnnounceClickAndUpdate(t *testing.T) {
	t.Parallel()
	durable(t, func(t *testing.T, open teststores.Opener) {
		h := newHarness(t, open, setup{})
		p := h.propose(`{"amount": 40, "customer": "c_9"}`)
		bob := h.dm("U0BOB", anyState)
		carol := h.dm("U0CAROL", anyState)
		if bob.Channel != "D0BOB" || carol.Channel != "D0CAROL" {
			t.Errorf("messages in %s and %s, want the bot's direct messages", bob.Channel, carol.Channel)
		}
		for _, m := range []slacktest.Message{bob, carol} {
			text := m.Shown()
			for _, want := range []string{"Refund a customer", "Requested by alice", `"customer": "c_9"`, "Expires "} {
				if !strings.Contains(text, want) {
					t.Errorf("message to %s lacks %q:\n%s", m.To, want, text)
				}
			}
			b := m.Buttons()
			if !strings.HasPrefix(b["countersign_approve"].Value, p.ID+" ") || !strings.HasPrefix(b["countersign_reject"].Value, p.ID+" ") {
				t.Errorf("message to %s: buttons %+v, want approve and reject carrying %s and a nonce", m.To, b, p.ID)
			}
			if b["countersign_open"].URL != publicURL+"/proposals/"+p.ID {
				t.Errorf("message to %s: inbox link %q, want under public_url", m.To, b["countersign_open"].URL)
			}
		}
		if bob.Buttons()["countersign_approve"].Value == carol.Buttons()["countersign_approve"].Value {
			t.Error("bob's and carol's buttons carry the same nonce")
		}
		for _, nobody := range []string{"U0ALICE", "U0DAVE"} {
			if got := h.fake.Sent(nobody); len(got) != 0 {
				t.Errorf("%s was sent %d messages, want none (the requester; one who may not decide)", nobody, len(got))
			}
		}

		onlyReply(t, h.click("U0BOB", bob.Buttons()["countersign_approve"], "bob1"), "Recorded: you approved")
		got := h.proposal(p.ID)
		if got.Status == cstype.StatusPending || len(got.Decisions) != 1 || got.Decisions[0].Actor != "bob" ||
			got.Decisions[0].Via != "slack" || got.Decisions[0].ActorKind != "human" {
			t.Fatalf("after bob's click: %s %+v; want approved by bob, a person, via slack", got.Status, got.Decisions)
		}
		for _, user := range []string{"U0BOB", "U0CAROL"} {
			m := h.dm(user, func(m slacktest.Message) bool { return strings.Contains(m.Shown(), "succeeded") })
			if live(m) || !strings.Contains(m.Shown(), "bob approved via slack") {
				t.Errorf("message to %s after settlement: live %v:\n%s\nwant no button, who decided and via which channel", user, live(m), m.Shown())
			}
		}
		// A double click, on the message as it was: nothing changes.
		onlyReply(t, h.click("U0BOB", bob.Buttons()["countersign_approve"], "bob2"), "Nothing was decided")
		onlyReply(t, h.click("U0CAROL", carol.Buttons()["countersign_reject"], "carol1"), "Nothing was decided")
		if after := h.proposal(p.ID); len(after.Decisions) != 1 {
			t.Errorf("decisions after the stale clicks: %+v, want bob's only", after.Decisions)
		}
		if n := h.fake.Count("chat.postMessage"); n != 2 {
			t.Errorf("%d chat.postMessage calls, want 2 (one per approver)", n)
		}
	})
}

// Clicks that must decide nothing: a bad or missing signature, an old
// timestamp (401), another workspace or app (403), a malformed payload
// (400), and — answered 200 with an ephemeral reply — an unmapped Slack
// user, a mapped person who may not decide, and a forged nonce.
func TestClicksThatDecideNothing(t *testing.T) {
	t.Parallel()
	durable(t, func(t *testing.T, open teststores.Opener) {
		h := newHarness(t, open, setup{})
		p := h.propose(`{"amount": 40, "customer": "c_9"}`)
		approve := h.dm("U0BOB", anyState).Buttons()["countersign_approve"]
		good := slacktest.FormBody(slacktest.Payload(teamID, appID, "U0BOB", h.fake.ResponseURL("x"), approve))

		for name, c := range map[string]struct {
			body   string
			header http.Header
			status int
		}{
			"bad signature": {good, slacktest.Sign(good, time.Now(), []byte("another secret")), http.StatusUnauthorized},
			"old timestamp": {good, slacktest.Sign(good, time.Now().Add(-6*time.Minute), signingSecret), http.StatusUnauthorized},
			"future stamp":  {good, slacktest.Sign(good, time.Now().Add(6*time.Minute), signingSecret), http.StatusUnauthorized},
			"no signature":  {good, http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, http.StatusUnauthorized},
			"body changed":  {good + "x", slacktest.Sign(good, time.Now(), signingSecret), http.StatusUnauthorized},
			"another team":  {slacktest.FormBody(slacktest.Payload("T0OTHER", appID, "U0BOB", "", approve)), nil, http.StatusForbidden},
			"another app":   {slacktest.FormBody(slacktest.Payload(teamID, "A0OTHER", "U0BOB", "", approve)), nil, http.StatusForbidden},
			"not a payload": {"payload=%7Bnot+json", nil, http.StatusBadRequest},
			"no payload":    {"text=hello", nil, http.StatusBadRequest},
			"signed JSON": {good, func() http.Header {
				h := slacktest.Sign(good, time.Now(), signingSecret)
				h.Set("Content-Type", "application/json")
				return h
			}(), http.StatusUnsupportedMediaType},
		} {
			hdr := c.header
			if hdr == nil {
				hdr = slacktest.Sign(c.body, time.Now(), signingSecret)
			}
			if status, answer := h.send(c.body, hdr); status != c.status || !strings.Contains(answer, `"error"`) {
				t.Errorf("%s: %d %s, want %d with an error", name, status, answer, c.status)
			}
		}
		onlyReply(t, h.click("U0MALLORY", approve, "mallory"), "not mapped")
		onlyReply(t, h.click("U0DAVE", approve, "dave"), "may not decide")
		forged := approve
		forged.Value = p.ID + " 00000000000000000000000000000000"
		onlyReply(t, h.click("U0BOB", forged, "forged"), "out of date")
		// The requester's own click, with the value of bob's button.
		onlyReply(t, h.click("U0ALICE", approve, "alice"), "Nothing was decided")
		if got := h.proposal(p.ID); got.Status != cstype.StatusPending || len(got.Decisions) != 0 {
			t.Fatalf("after the refused clicks: %s %+v; want pending, undecided", got.Status, got.Decisions)
		}
	})
}

// A quorum of two: bob and carol click at once, each on the message as it
// shows (no update lands between the clicks). Both are applied, the
// proposal is approved, and every message ends without a button.
func TestQuorumOfTwoClickedAtOnce(t *testing.T) {
	t.Parallel()
	durable(t, func(t *testing.T, open teststores.Opener) {
		h := newHarness(t, open, setup{quorum: 2})
		p := h.propose(`{"amount": 40, "customer": "c_9"}`)
		bob := h.dm("U0BOB", anyState).Buttons()["countersign_approve"]
		carol := h.dm("U0CAROL", anyState).Buttons()["countersign_approve"]
		release := h.fake.HoldUpdates()
		t.Cleanup(release)
		var wg sync.WaitGroup
		replies := map[string][]slacktest.Reply{}
		var mu sync.Mutex
		for user, button := range map[string]slacktest.Element{"U0BOB": bob, "U0CAROL": carol} {
			wg.Go(func() {
				got := h.click(user, button, user)
				mu.Lock()
				replies[user] = got
				mu.Unlock()
			})
		}
		wg.Wait()
		release()
		for _, got := range replies {
			onlyReply(t, got, "Recorded: you approved")
		}
		got := h.proposal(p.ID)
		if got.Status == cstype.StatusPending || got.Approvals() != 2 {
			t.Fatalf("after both clicks: %s %+v; want approved by both", got.Status, got.Decisions)
		}
		for _, user := range []string{"U0BOB", "U0CAROL"} {
			m := h.dm(user, func(m slacktest.Message) bool { return strings.Contains(m.Shown(), "succeeded") })
			if live(m) || !strings.Contains(m.Shown(), "bob approved via slack") || !strings.Contains(m.Shown(), "carol approved via slack") {
				t.Errorf("message to %s: live %v:\n%s", user, live(m), m.Shown())
			}
		}
	})
}

// Quorum progress: after bob's approval carol's message shows one of two
// and carries a new nonce; her click on the message as it was is stale
// and decides nothing; her click on the updated one decides.
func TestProgressRotatesTheNonce(t *testing.T) {
	t.Parallel()
	durable(t, func(t *testing.T, open teststores.Opener) {
		h := newHarness(t, open, setup{quorum: 2})
		p := h.propose(`{"amount": 40, "customer": "c_9"}`)
		bob := h.dm("U0BOB", anyState)
		old := h.dm("U0CAROL", anyState).Buttons()["countersign_approve"]
		onlyReply(t, h.click("U0BOB", bob.Buttons()["countersign_approve"], "bob"), "Recorded")
		carol := h.dm("U0CAROL", func(m slacktest.Message) bool { return strings.Contains(m.Shown(), "Waiting for approval: 1 of 2") })
		fresh := carol.Buttons()["countersign_approve"]
		if !live(carol) || fresh.Value == old.Value {
			t.Fatalf("carol's message after bob's approval: live %v, value %q (was %q); want live with a new nonce", live(carol), fresh.Value, old.Value)
		}
		if m := h.dm("U0BOB", func(m slacktest.Message) bool { return m.Updates > 0 }); live(m) {
			t.Errorf("bob's message after his approval still has buttons:\n%s", m.Shown())
		}
		// Once the update has landed (the store retired the nonce it
		// replaced), the button of the message as it was is stale.
		h.eventually("carol's previous nonce is retired", func() bool {
			a, err := h.engine.SlackAnnouncement(t.Context(), "acme", p.ID, "carol")
			return err == nil && a.PrevNonce == ""
		})
		onlyReply(t, h.click("U0CAROL", old, "stale"), "out of date")
		if got := h.proposal(p.ID); got.Status != cstype.StatusPending || got.Approvals() != 1 {
			t.Fatalf("after the stale click: %s, %d approvals; want pending with bob's", got.Status, got.Approvals())
		}
		onlyReply(t, h.click("U0CAROL", fresh, "fresh"), "Recorded")
		h.dm("U0CAROL", func(m slacktest.Message) bool {
			return !live(m) && strings.Contains(m.Shown(), "carol approved via slack")
		})
	})
}

// Expiry updates every message: no button, and the reason.
func TestExpiryUpdates(t *testing.T) {
	t.Parallel()
	durable(t, func(t *testing.T, open teststores.Opener) {
		h := newHarness(t, open, setup{ttl: 1500 * time.Millisecond})
		p := h.propose(`{"amount": 40, "customer": "c_9"}`)
		button := h.dm("U0BOB", anyState).Buttons()["countersign_reject"]
		h.eventually("the proposal expires", func() bool { return h.proposal(p.ID).Status == cstype.StatusExpired })
		for _, user := range []string{"U0BOB", "U0CAROL"} {
			h.dm(user, func(m slacktest.Message) bool {
				return !live(m) && strings.Contains(m.Shown(), "Expired before it was decided")
			})
		}
		onlyReply(t, h.click("U0BOB", button, "late"), "Nothing was decided")
	})
}

// A Slack API failure fails the delivery; the outbox retries it, and
// each approver still gets one message.
func TestOutboxRetriesAFailedPost(t *testing.T) {
	t.Parallel()
	durable(t, func(t *testing.T, open teststores.Opener) {
		h := newHarness(t, open, setup{})
		h.fake.Fail("chat.postMessage", 2)
		h.propose(`{"amount": 40, "customer": "c_9"}`)
		h.dm("U0BOB", anyState)
		h.dm("U0CAROL", anyState)
		if n := h.fake.Count("chat.postMessage"); n != 4 {
			t.Errorf("%d chat.postMessage calls, want 4 (two failed, one per approver)", n)
		}
		if n := len(h.fake.All()); n != 2 {
			t.Errorf("%d messages, want 2", n)
		}
	})
}

// A step-up proposal: Slack offers a link to the inbox instead of Approve,
// and an Approve click decides nothing and answers with that link.
func TestStepUpShowsALink(t *testing.T) {
	t.Parallel()
	durable(t, func(t *testing.T, open teststores.Opener) {
		h := newHarness(t, open, setup{stepUp: countersign.StepUpPasskey})
		p := h.propose(`{"amount": 40, "customer": "c_9"}`)
		m := h.dm("U0BOB", anyState)
		b := m.Buttons()
		if _, ok := b["countersign_approve"]; ok {
			t.Fatalf("a step-up proposal's message has an Approve button: %+v", b)
		}
		if open := b["countersign_open"]; open.URL != publicURL+"/proposals/"+p.ID || !strings.Contains(open.Text.Text, "passkey") {
			t.Errorf("link %+v, want Approve with a passkey to the inbox page", open)
		}
		forged := b["countersign_reject"]
		forged.ActionID = "countersign_approve"
		onlyReply(t, h.click("U0BOB", forged, "approve"), publicURL+"/proposals/"+p.ID)
		if got := h.proposal(p.ID); len(got.Decisions) != 0 {
			t.Fatalf("decisions %+v, want none", got.Decisions)
		}
		onlyReply(t, h.click("U0BOB", b["countersign_reject"], "reject"), "Recorded: you rejected")
	})
}

// post: a channel id makes one post without the input or decision buttons.
func TestChannelPost(t *testing.T) {
	t.Parallel()
	durable(t, func(t *testing.T, open teststores.Opener) {
		h := newHarness(t, open, setup{post: "C0APPROVALS"})
		p := h.propose(`{"amount": 40, "customer": "c_secret"}`)
		m := h.dm("C0APPROVALS", anyState)
		if live(m) || strings.Contains(m.Shown(), "c_secret") || !strings.Contains(m.Shown(), "Requested by alice") ||
			m.Buttons()["countersign_open"].URL != publicURL+"/proposals/"+p.ID {
			t.Errorf("channel post: live %v, buttons %+v:\n%s\nwant title and requester, a link, no input, no decision button", live(m), m.Buttons(), m.Shown())
		}
		for _, user := range []string{"U0BOB", "U0CAROL"} {
			if n := len(h.fake.Sent(user)); n != 0 {
				t.Errorf("%s got %d direct messages, want none with a channel post", user, n)
			}
		}
	})
}

// Agent text stays plain: no mention, link or code-block break-out, and
// hidden characters shown.
func TestAgentTextIsPlain(t *testing.T) {
	t.Parallel()
	h := newHarness(t, teststores.Memory, setup{})
	h.propose(`{"amount": 1, "customer": "<@U0BOB> <!channel> <https://evil.example|click>", "note": "` + "```" + `*bold*` + "\u202e" + `"}`)
	m := h.dm("U0BOB", anyState)
	var input string
	for _, b := range m.Blocks {
		if b.Text != nil && strings.HasPrefix(b.Text.Text, "```") {
			input += b.Text.Text
			if !b.Text.Verbatim || b.Text.Type != "mrkdwn" {
				t.Errorf("input block %+v: want verbatim mrkdwn", *b.Text)
			}
		}
	}
	for _, bad := range []string{"<@U0BOB>", "<!channel>", "<https://", "```*bold*", "\u202e"} {
		if strings.Contains(input, bad) {
			t.Errorf("the input block holds %q:\n%s", bad, input)
		}
	}
	for _, want := range []string{"&lt;@U0BOB&gt;", `\u{0060}\u{0060}\u{0060}*bold*`, `\u{202E}`} {
		if !strings.Contains(input, want) {
			t.Errorf("the input block lacks %q:\n%s", want, input)
		}
	}
}
