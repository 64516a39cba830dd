package email_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// FuzzTokenRoute sends any method, path, content type, body and cookie to
// the link pages: no answer is a 500 (nor any 5xx but 503), and a decision
// is recorded only by a POST of one of bob's live links whose form's csrf
// equals its cookie, a well-formed value.
func FuzzTokenRoute(f *testing.F) {
	h := newHarness(f, func(now func() time.Time) store.Store { return memstore.New(&memstore.Options{Now: now}) }, harnessOptions{})
	p := h.call("payments.bulk", 300) // a quorum of two: one decision leaves it pending
	bob := h.mailFor("bob@acme.example", p, 1)
	approve, reject := strings.TrimPrefix(bob.Approve, h.url), strings.TrimPrefix(bob.Reject, h.url)
	handler := h.channel.Handler()
	v := newToken()
	form := "application/x-www-form-urlencoded"
	f.Add("GET", approve, "", "", "")
	f.Add("POST", approve, form, "csrf="+v, v)
	f.Add("POST", reject, form, "csrf="+v, v)
	f.Add("POST", approve, form, "csrf="+v, newToken())
	f.Add("POST", approve, "text/plain", "csrf="+v, v)
	f.Add("POST", "/d/"+newToken(), form, "csrf="+v, v)
	f.Add("PUT", approve, form, "", "")
	f.Add("GET", "/d/%zz", "", "", "")
	f.Add("POST", approve, form, "csrf="+v+"&csrf=x", v)
	f.Add("POST", approve, form, strings.Repeat("a", 9000), v)
	decisions := func(t *testing.T) int {
		got, err := h.engine.Proposal(t.Context(), carol, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		return len(got.Decisions)
	}
	f.Fuzz(func(t *testing.T, method, path, contentType, body, cookie string) {
		before := decisions(t)
		req, err := http.NewRequest(method, "http://countersign.test"+path, strings.NewReader(body))
		if err != nil {
			return // not a request a client could send
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		if cookie != "" {
			req.Header.Set("Cookie", "countersign_email_csrf="+cookie)
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s %q: %d", method, path, rec.Code)
		}
		if rec.Code == http.StatusServiceUnavailable {
			t.Fatalf("%s %q: 503 from a store that cannot fail", method, path)
		}
		after := decisions(t)
		if after == before {
			return
		}
		vals, _ := url.ParseQuery(body)
		if method != http.MethodPost || (req.URL.Path != approve && req.URL.Path != reject) || before != 0 || after != 1 ||
			vals.Get("csrf") != cookie || len(cookie) != 43 {
			t.Fatalf("%s %q (body %q, cookie %q) decided: %d → %d decisions", method, path, body, cookie, before, after)
		}
	})
}
