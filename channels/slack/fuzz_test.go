package slack_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/channels/slack"
	"github.com/countersign/countersign/channels/slack/slacktest"
	"github.com/countersign/countersign/internal/teststores"
	"github.com/countersign/countersign/store/memstore"
)

// FuzzParseInteraction: the payload parser never panics, and what it
// accepts is a block_actions payload with one action.
func FuzzParseInteraction(f *testing.F) {
	f.Add([]byte(slacktest.FormBody(slacktest.Payload(teamID, appID, "U0BOB", "http://x/actions/1", slacktest.Element{ActionID: "countersign_approve", Value: "prp_1 n"}))))
	f.Add([]byte("payload=%7B%22type%22%3A%22block_actions%22%7D"))
	f.Add([]byte("payload="))
	f.Add([]byte("%zz"))
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := slack.ParseInteraction(body)
		if err == nil && (in.Type != "block_actions" || len(in.Actions) != 1) {
			t.Fatalf("accepted %+v", in)
		}
	})
}

// FuzzInteractionHandler: whatever the body, the route never answers 5xx
// or panics, and an unsigned request decides nothing.
func FuzzInteractionHandler(f *testing.F) {
	e, err := countersign.New(countersign.Options{Store: memstore.New(nil), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	ch, err := slack.New(slack.Options{Engine: e, Tenant: "acme", TeamID: teamID, BotToken: botToken, SigningSecret: signingSecret,
		APIURL: "http://127.0.0.1:9/api/", Users: users, PublicURL: publicURL, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	route := ch.Handler()
	f.Add([]byte(slacktest.FormBody(slacktest.Payload(teamID, appID, "U0BOB", "", slacktest.Element{ActionID: "countersign_approve", Value: "prp_1 n"}))), true)
	f.Add([]byte("payload=%7B%22type%22%3A%22block_actions%22%2C%22actions%22%3A%5B%7B%7D%5D%7D"), true)
	f.Add([]byte("payload="), false)
	f.Fuzz(func(t *testing.T, body []byte, signed bool) {
		hdr := http.Header{}
		if signed {
			hdr = slacktest.Sign(string(body), time.Now(), signingSecret)
		}
		req := httptest.NewRequest(http.MethodPost, "/v1/slack/interactions", bytes.NewReader(body))
		req.Header = hdr
		rec := httptest.NewRecorder()
		route.ServeHTTP(rec, req)
		switch {
		case rec.Code >= 500:
			t.Fatalf("%d for %q", rec.Code, body)
		case !signed && rec.Code != http.StatusUnauthorized:
			t.Fatalf("unsigned: %d, want 401", rec.Code)
		}
	})
}

// Bodies and headers a fuzzer would try, through the running route: no
// 5xx, and no 200 without a signature.
func TestMalformedRequestsThroughTheRoute(t *testing.T) {
	t.Parallel()
	h := newHarness(t, teststores.Memory, setup{})
	p := h.propose(`{"amount": 40, "customer": "c_9"}`)
	approve := h.dm("U0BOB", anyState).Buttons()["countersign_approve"]
	good := slacktest.FormBody(slacktest.Payload(teamID, appID, "U0BOB", h.fake.ResponseURL("x"), approve))
	for _, body := range []string{good, good[:len(good)/2], "payload=" + strings.Repeat("%", 100), "", strings.Repeat("a", 300<<10)} {
		for _, hdr := range []http.Header{nil, {"X-Slack-Signature": {"v0=zz"}, "X-Slack-Request-Timestamp": {"-1"}},
			{"X-Slack-Signature": {"v0=" + strings.Repeat("0", 64)}, "X-Slack-Request-Timestamp": {"99999999999999999999"}}} {
			if hdr == nil {
				hdr = http.Header{}
			}
			if status, _ := h.send(body, hdr); status >= 500 || status == http.StatusOK {
				t.Errorf("unsigned body of %d bytes: %d, want a 4xx", len(body), status)
			}
		}
		// Signed garbage: never 5xx.
		if status, _ := h.send(body, slacktest.Sign(body, time.Now(), signingSecret)); status >= 500 {
			t.Errorf("signed body of %d bytes: %d", len(body), status)
		}
	}
	// Only the one good body, signed, could decide: bob's approval.
	if got := h.proposal(p.ID); len(got.Decisions) > 1 || (len(got.Decisions) == 1 && got.Decisions[0].Actor != "bob") {
		t.Fatalf("decisions %+v, want at most bob's", got.Decisions)
	}
}
