package web_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image/png"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/web"
)

func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := h.client()
	for _, path := range []string{"/login", "/static/app.js", "/static/app.css"} {
		resp, _ := c.get(path)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
		for k, want := range map[string]string{
			"Content-Security-Policy": web.ContentSecurityPolicy,
			"X-Content-Type-Options":  "nosniff",
			"Referrer-Policy":         "no-referrer",
		} {
			if got := resp.Header.Get(k); got != want {
				t.Errorf("%s: %s = %q, want %q", path, k, got, want)
			}
		}
	}
	resp, body := c.get("/login")
	if strings.Contains(body, "<script>") || strings.Contains(body, "style=") || strings.Contains(body, "<style") {
		t.Errorf("the sign-in page has inline script or style:\n%s", body)
	}
	for _, ck := range resp.Cookies() {
		if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
			t.Errorf("cookie %s: HttpOnly %v SameSite %v", ck.Name, ck.HttpOnly, ck.SameSite)
		}
	}
	// The API is served beside the inbox.
	if resp, _ := c.get("/healthz"); resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %d", resp.StatusCode)
	}
	if resp, _ := c.get("/v1/proposals"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/v1/proposals without a token: %d", resp.StatusCode)
	}
	// Any other path is the inbox's 404 page.
	if resp, body := c.get("/nothing/here"); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "There is no such page.") ||
		resp.Header.Get("Content-Security-Policy") != web.ContentSecurityPolicy {
		t.Errorf("/nothing/here: %d\n%s", resp.StatusCode, body)
	}
	// Signed out, pages send the browser to sign in.
	if resp, _ := c.get("/proposals/prp_x"); resp.StatusCode != http.StatusSeeOther ||
		resp.Header.Get("Location") != "/login?next=%2Fproposals%2Fprp_x" {
		t.Errorf("signed out: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestSignIn(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := h.client()
	tok := c.csrf("/login")
	if resp, body := c.post("/login", url.Values{"csrf": {tok}, "token": {"key_nobody"}}, nil); resp.StatusCode != http.StatusUnauthorized ||
		!strings.Contains(body, "not valid") {
		t.Errorf("unknown key: %d\n%s", resp.StatusCode, body)
	}
	if resp, _ := c.post("/login", url.Values{"token": {"key_bob"}}, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("sign-in without the form token: %d", resp.StatusCode)
	}
	c.signIn("key_bob")
	resp, body := c.get("/")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "bob") {
		t.Fatalf("inbox after sign-in: %d\n%s", resp.StatusCode, body)
	}
	for _, ck := range c.http.Jar.Cookies(mustURL(t, h.url)) {
		if ck.Name == "countersign_session" && len(ck.Value) < 43 {
			t.Errorf("session id %q: want 32 random bytes", ck.Value)
		}
	}
	tok = c.csrf("/")
	if resp, _ := c.post("/logout", url.Values{"csrf": {tok}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %d", resp.StatusCode)
	}
	if resp, _ := c.get("/"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("after sign-out: %d, want a redirect to sign in", resp.StatusCode)
	}
}

func TestCSRF(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := h.propose("t_csrf", "c_1", 10)
	c := h.client()
	c.signIn("key_bob")
	tok := c.csrf("/proposals/" + id)
	path := "/proposals/" + id + "/decide"
	approve := func(form url.Values, hdr http.Header) int {
		form.Set("verdict", "approved")
		resp, _ := c.post(path, form, hdr)
		return resp.StatusCode
	}
	for name, tc := range map[string]struct {
		form url.Values
		hdr  http.Header
	}{
		"no token":        {url.Values{}, nil},
		"wrong token":     {url.Values{"csrf": {tok + "x"}}, nil},
		"other origin":    {url.Values{"csrf": {tok}}, http.Header{"Origin": {"https://evil.example"}}},
		"cross-site":      {url.Values{"csrf": {tok}}, http.Header{"Sec-Fetch-Site": {"cross-site"}}},
		"logout no token": {nil, nil},
	} {
		if tc.form == nil {
			if resp, _ := c.post("/logout", url.Values{}, nil); resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s: %d, want 403", name, resp.StatusCode)
			}
			continue
		}
		if got := approve(tc.form, tc.hdr); got != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, got)
		}
	}
	if _, body := c.get("/proposals/" + id); !strings.Contains(body, `id="status">pending<`) {
		t.Fatalf("a refused POST changed the proposal:\n%s", body)
	}
	resp, _ := c.post(path, url.Values{"csrf": {tok}, "verdict": {"approved"}, "reason": {"ok"}},
		http.Header{"Origin": {h.url}, "Sec-Fetch-Site": {"same-origin"}})
	if resp.StatusCode != http.StatusSeeOther || !strings.HasSuffix(resp.Header.Get("Location"), "?result=applied") {
		t.Fatalf("approve with the token: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, body := c.get(resp.Header.Get("Location"))
	if !strings.Contains(body, "Your decision was recorded.") || !strings.Contains(body, "via web") {
		t.Errorf("after approving:\n%s", body)
	}
	// The same decision again is unchanged, in words.
	resp, _ = c.post(path, url.Values{"csrf": {tok}, "verdict": {"approved"}}, nil)
	if !strings.HasSuffix(resp.Header.Get("Location"), "?result=unchanged") {
		t.Errorf("approve again: %s", resp.Header.Get("Location"))
	}
}

func TestOtherTenant(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := h.propose("t_secret", "c_secret", 99)
	eve := h.client()
	eve.signIn("key_eve")
	resp, body := eve.get("/proposals/" + id)
	if resp.StatusCode != http.StatusForbidden || strings.Contains(body, "c_secret") || strings.Contains(body, "t_secret") {
		t.Errorf("another tenant's proposal: %d\n%s", resp.StatusCode, body)
	}
	if resp, _ := eve.get("/proposals/prp_nothing"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown proposal: %d", resp.StatusCode)
	}
	tok := eve.csrf("/")
	resp, body = eve.post("/proposals/"+id+"/decide", url.Values{"csrf": {tok}, "verdict": {"approved"}}, nil)
	if resp.StatusCode != http.StatusForbidden || strings.Contains(body, "c_secret") {
		t.Errorf("deciding another tenant's proposal: %d\n%s", resp.StatusCode, body)
	}
	if _, body := eve.get("/?status=all"); strings.Contains(body, id) {
		t.Errorf("another tenant's proposal listed:\n%s", body)
	}
	// alice owns the thread but may not decide: she sees it, without buttons.
	alice := h.client()
	alice.signIn("key_alice")
	if resp, body := alice.get("/proposals/" + id); resp.StatusCode != http.StatusOK || strings.Contains(body, `id="approve"`) {
		t.Errorf("the requester's view: %d\n%s", resp.StatusCode, body)
	}
}

func TestRememberOffered(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := h.propose("t_rem", "c_rem", 5)
	c := h.client()
	c.signIn("key_bob")
	_, body := c.get("/proposals/" + id)
	if !strings.Contains(body, `value="thread"`) || strings.Contains(body, `value="run"`) {
		t.Errorf("remember choices: want thread only:\n%s", body)
	}
	tok := c.csrf("/proposals/" + id)
	resp, body := c.post("/proposals/"+id+"/decide", url.Values{"csrf": {tok}, "verdict": {"approved"}, "remember": {"run"}}, nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "Nothing was decided") {
		t.Errorf("remember run, which the rule does not allow: %d, want 400 saying nothing was decided", resp.StatusCode)
	}
}

// TestRuleShown checks that a proposal's page names the rule that applied
// to its call, with its condition.
func TestRuleShown(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := h.client()
	c.signIn("key_bob")
	for _, tc := range []struct {
		amount float64
		want   string
	}{
		{250, `<dd id="rule"><code>payments.*</code></dd>`},
		{250000, `<dd id="rule"><code>payments.refund</code> when <code>input.amount &gt; 100000</code></dd>`},
	} {
		id := h.propose(fmt.Sprintf("t_rule_%g", tc.amount), "c_rule", tc.amount)
		_, body := c.get("/proposals/" + id)
		if !strings.Contains(body, tc.want) {
			t.Errorf("refund of %g: the page does not show %s:\n%s", tc.amount, tc.want, body)
		}
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestOperatorResolves(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := h.call("flaky.write", "t_flaky", "c_f", 1)
	bob := h.client()
	bob.signIn("key_bob")
	tok := bob.csrf("/proposals/" + id)
	if resp, _ := bob.post("/proposals/"+id+"/decide", url.Values{"csrf": {tok}, "verdict": {"approved"}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve: %d", resp.StatusCode)
	}
	olga := h.client()
	olga.signIn("key_olga")
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body := olga.get("/proposals/" + id)
		if strings.Contains(body, `id="status">unknown<`) {
			if !strings.Contains(body, "Resolve as operator") || !strings.Contains(body, "Do not retry automatically") {
				t.Fatalf("an unknown proposal, for an operator:\n%s", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proposal never became unknown:\n%s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// bob is no operator: no form, and a forged POST is refused.
	if _, body := bob.get("/proposals/" + id); strings.Contains(body, "Resolve as operator") {
		t.Error("a non-operator is offered to resolve")
	}
	if resp, _ := bob.post("/proposals/"+id+"/resolve", url.Values{"csrf": {tok}, "status": {"failed"}, "note": {"x"}}, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a non-operator resolves: %d", resp.StatusCode)
	}
	otok := olga.csrf("/proposals/" + id)
	resp, _ := olga.post("/proposals/"+id+"/resolve", url.Values{"csrf": {otok}, "status": {"failed"}, "note": {"checked the ledger: nothing sent"}}, nil)
	if resp.StatusCode != http.StatusSeeOther || !strings.HasSuffix(resp.Header.Get("Location"), "?result=resolved") {
		t.Fatalf("resolve: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, body := olga.get(resp.Header.Get("Location"))
	if !strings.Contains(body, `id="status">failed<`) || !strings.Contains(body, "checked the ledger: nothing sent") {
		t.Errorf("after resolving:\n%s", body)
	}
}

// TestReconcileAttemptsShown: a proposal whose backend keeps answering
// "unknown" to Reconcile shows the operator, on its page and in the list,
// how many times it was asked and when it is asked next.
func TestReconcileAttemptsShown(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := h.call("unsure.write", "t_unsure", "c_u", 1)
	bob := h.client()
	bob.signIn("key_bob")
	tok := bob.csrf("/proposals/" + id)
	if resp, _ := bob.post("/proposals/"+id+"/decide", url.Values{"csrf": {tok}, "verdict": {"approved"}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve: %d", resp.StatusCode)
	}
	attempts := regexp.MustCompile(`<dd id="reconciles">([0-9]+) answered that it is not known yet · next <time`)
	deadline := time.Now().Add(10 * time.Second)
	var body string
	for {
		_, body = bob.get("/proposals/" + id)
		if m := attempts.FindStringSubmatch(body); m != nil && m[1] != "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page never showed two reconcile attempts:\n%s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(body, `id="status">reconciling<`) || !regexp.MustCompile(`Asked [0-9]+ times, the system could not say whether it was applied; next attempt at `).MatchString(body) {
		t.Errorf("the proposal's page:\n%s", body)
	}
	_, list := bob.get("/?status=reconciling")
	if !regexp.MustCompile(`data-id="` + id + `"[^<]*>(?s:.*?)<span class="meta note">Asked (once|[0-9]+ times), the system could not say`).MatchString(list) {
		t.Errorf("the list does not say how often it was asked:\n%s", list)
	}
}

// TestFavicon: /favicon.ico is an icon file holding 16, 32 and 48 pixel
// images, served with the inbox's headers, and every page links it.
func TestFavicon(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := h.client()
	resp, body := c.get("/favicon.ico")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/x-icon" ||
		resp.Header.Get("Content-Security-Policy") != web.ContentSecurityPolicy {
		t.Fatalf("/favicon.ico: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ico := []byte(body)
	if len(ico) < 6 || binary.LittleEndian.Uint16(ico[0:]) != 0 || binary.LittleEndian.Uint16(ico[2:]) != 1 {
		t.Fatalf("not an icon file: % x", ico[:min(len(ico), 16)])
	}
	var sizes []int
	for i := range int(binary.LittleEndian.Uint16(ico[4:])) {
		e := ico[6+16*i : 22+16*i]
		size, off := binary.LittleEndian.Uint32(e[8:]), binary.LittleEndian.Uint32(e[12:])
		img, err := png.Decode(bytes.NewReader(ico[off : off+size]))
		if err != nil {
			t.Fatalf("image %d: %v", i, err)
		}
		if b := img.Bounds(); b.Dx() != int(e[0]) || b.Dy() != int(e[1]) {
			t.Errorf("image %d is %v, its entry says %dx%d", i, b, e[0], e[1])
		}
		sizes = append(sizes, img.Bounds().Dx())
	}
	if fmt.Sprint(sizes) != "[16 32 48]" {
		t.Errorf("icon sizes %v, want [16 32 48]", sizes)
	}
	link := `<link rel="icon" href="/favicon.ico"`
	if _, body := c.get("/login"); !strings.Contains(body, link) {
		t.Errorf("the sign-in page does not link the icon:\n%s", body)
	}
	if _, body := c.get("/nothing/here"); !strings.Contains(body, link) {
		t.Errorf("the error page does not link the icon:\n%s", body)
	}
	c.signIn("key_bob")
	id := h.propose("t_icon", "c_icon", 1)
	for _, path := range []string{"/", "/proposals/" + id} {
		if _, body := c.get(path); !strings.Contains(body, link) {
			t.Errorf("%s does not link the icon:\n%s", path, body)
		}
	}
}
