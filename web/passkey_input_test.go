package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/teststores"
)

// TestPasskeyRoutesRefuseBadInput: what a client may send the passkey
// routes without a browser (malformed, oversized or foreign answers,
// unknown links, a missing session or CSRF token) is refused with a page
// or JSON message that says why, never a 500, and changes nothing.
func TestPasskeyRoutesRefuseBadInput(t *testing.T) {
	eachDurable(t, func(t *testing.T, open teststores.Opener) {
		h := newPasskeyHarness(t, open)
		refund := h.call("payments.refund", 500)
		bob := h.client("key_bob")
		csrf := bob.csrf("/passkeys")

		pages := []struct {
			name, path string
			form       url.Values
			status     int
			says       string
		}{
			{"an assertion that is not JSON", "/proposals/" + refund + "/decide",
				url.Values{"verdict": {"approved"}, "assertion": {"nope"}}, http.StatusBadRequest, "could not be read"},
			{"an oversized assertion", "/proposals/" + refund + "/decide",
				url.Values{"verdict": {"approved"}, "assertion": {`{"a":"` + strings.Repeat("x", 50<<10) + `"}`}}, http.StatusBadRequest, "could not be read"},
			{"an empty assertion object", "/proposals/" + refund + "/decide",
				url.Values{"verdict": {"approved"}, "assertion": {`{}`}}, http.StatusForbidden, "needs your passkey"},
			{"an assertion of the wrong shape", "/proposals/" + refund + "/decide",
				url.Values{"verdict": {"approved"}, "assertion": {`{"id":1,"response":[]}`}}, http.StatusForbidden, "needs your passkey"},
			{"an attestation that is not JSON", "/passkeys/add",
				url.Values{"attestation": {"{"}}, http.StatusBadRequest, "could not be read"},
			{"an empty attestation object", "/passkeys/add",
				url.Values{"attestation": {`{}`}}, http.StatusBadRequest, "could not be read"},
			{"no attestation", "/passkeys/enroll/whatever",
				url.Values{}, http.StatusBadRequest, "needs the page"},
			{"a removal without an assertion", "/passkeys/remove",
				url.Values{"credential": {"abc"}}, http.StatusBadRequest, "needs an assertion"},
			{"a removal with a malformed assertion", "/passkeys/remove",
				url.Values{"credential": {"abc"}, "assertion": {`{"x":1}`}}, http.StatusBadRequest, "could not be read"},
		}
		for _, c := range pages {
			c.form.Set("csrf", csrf)
			resp, body := bob.post(c.path, c.form, nil)
			if resp.StatusCode != c.status || !strings.Contains(body, c.says) {
				t.Errorf("%s: %d, want %d saying %q:\n%s", c.name, resp.StatusCode, c.status, c.says, body)
			}
		}
		for _, token := range []string{"unknown", strings.Repeat("a", 300), "%00"} {
			resp, body := bob.get("/passkeys/enroll/" + token)
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "not an enrollment link") {
				t.Errorf("enrollment link %.20q: %d\n%s", token, resp.StatusCode, body)
			}
		}

		olga := h.client("key_olga")
		anonymous := &client{t: t, base: h.url, http: &http.Client{
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}}
		// A link opened signed out asks the person to sign in, then comes back.
		if resp, _ := anonymous.get("/passkeys/enroll/tok"); resp.StatusCode != http.StatusSeeOther ||
			resp.Header.Get("Location") != "/login?next="+url.QueryEscape("/passkeys/enroll/tok") {
			t.Errorf("an enrollment link signed out: %d %s, want the sign-in page, then back", resp.StatusCode, resp.Header.Get("Location"))
		}
		routes := []struct {
			name   string
			who    *client
			path   string
			form   url.Values
			status int
			says   string
		}{
			{"an unknown link's ceremony", bob, "/passkeys/enroll/unknown/begin", nil, http.StatusForbidden, "not an enrollment link"},
			{"managing without a passkey", bob, "/passkeys/challenge", nil, http.StatusForbidden, "You have no passkey"},
			{"a step-up without a passkey", bob, "/proposals/" + refund + "/step-up", nil, http.StatusForbidden, "You have no passkey"},
			{"a step-up by someone who does not approve", olga, "/proposals/" + refund + "/step-up", nil, http.StatusForbidden, ""},
			{"a step-up for no proposal", bob, "/proposals/prp_nope/step-up", nil, http.StatusNotFound, "no such proposal"},
			{"an addition with a malformed assertion", bob, "/passkeys/add/begin", url.Values{"assertion": {`{"x":1}`}}, http.StatusBadRequest, "could not be read"},
			{"an addition without an assertion", bob, "/passkeys/add/begin", nil, http.StatusBadRequest, "needs an assertion"},
			{"no CSRF token", bob, "/passkeys/challenge", url.Values{"csrf": {"forged"}}, http.StatusForbidden, "stale"},
			{"no session", anonymous, "/passkeys/challenge", url.Values{"csrf": {csrf}}, http.StatusForbidden, "session has ended"},
		}
		for _, c := range routes {
			form := c.form
			if form == nil {
				form = url.Values{}
			}
			if form.Get("csrf") == "" {
				form.Set("csrf", c.who.csrf("/passkeys"))
			}
			resp, body := c.who.post(c.path, form, nil)
			var msg struct {
				Message string `json:"message"`
			}
			err := json.Unmarshal([]byte(body), &msg)
			if resp.StatusCode != c.status || err != nil || msg.Message == "" || !strings.Contains(msg.Message, c.says) ||
				!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				t.Errorf("%s: %d %s, want %d with a JSON message saying %q", c.name, resp.StatusCode, body, c.status, c.says)
			}
		}
		if p := h.proposal(refund); p.Status != "pending" || len(p.Decisions) != 0 {
			t.Errorf("the refund after the bad input: %+v, want pending, undecided", p)
		}
	})
}
