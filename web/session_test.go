package web_test

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/server"
	"github.com/countersign/countersign/server/auth"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/sqlitestore"
	"github.com/countersign/countersign/store/storetest"
	"github.com/countersign/countersign/web"
)

// newInbox returns an inbox (with the API) for an engine on st, resolving
// tokens with authn; edit, when set, changes its options.
func newInbox(t *testing.T, st store.Store, now func() time.Time, authn auth.Authenticator, edit func(*web.Options)) *web.Inbox {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	e, err := countersign.New(countersign.Options{Store: st, Now: now, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	api, err := server.New(server.Options{Engine: e, Auth: authn, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	opts := web.Options{Engine: e, Auth: authn, API: api, Logger: quiet}
	if edit != nil {
		edit(&opts)
	}
	in, err := web.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// serve serves in on a test server, closed when t ends (or by the returned
// function).
func serve(t *testing.T, in *web.Inbox) (string, func()) {
	t.Helper()
	hs := httptest.NewServer(in.Handler())
	t.Cleanup(hs.Close)
	return hs.URL, hs.Close
}

// visitor is a client of one or more inboxes: a cookie jar per base URL is
// not what browsers do for one site, so it carries the session cookie by
// hand.
func visitor(t *testing.T, base string) *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: t, base: base, http: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// sessionCookie returns c's session cookie for base.
func (c *client) sessionCookie() *http.Cookie {
	c.t.Helper()
	for _, ck := range c.http.Jar.Cookies(mustURL(c.t, c.base)) {
		if ck.Name == "countersign_session" {
			return ck
		}
	}
	c.t.Fatal("no session cookie")
	return nil
}

// at returns a client of another inbox that presents c's session cookie.
func (c *client) at(base string) *client {
	c.t.Helper()
	o := visitor(c.t, base)
	o.http.Jar.SetCookies(mustURL(c.t, base), []*http.Cookie{c.sessionCookie()})
	return o
}

// signedInAs reports whether the inbox's list page opens for actor.
func (c *client) signedInAs(actor string) bool {
	c.t.Helper()
	resp, body := c.get("/")
	switch resp.StatusCode {
	case http.StatusOK:
		if !strings.Contains(body, `<span class="actor">`+actor+" ") {
			c.t.Fatalf("signed in, but not as %s:\n%s", actor, body)
		}
		return true
	case http.StatusSeeOther:
		if loc := resp.Header.Get("Location"); loc != "/login" {
			c.t.Fatalf("redirected to %s", loc)
		}
		return false
	}
	c.t.Fatalf("list: %d\n%s", resp.StatusCode, body)
	return false
}

func openSQLite(t *testing.T, path string) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func apiKeys(t *testing.T, keys ...auth.APIKey) *auth.APIKeys {
	t.Helper()
	a, err := auth.NewAPIKeys(keys)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

var bobKey = auth.APIKey{Key: "key_bob", Tenant: "acme", Actor: "bob", Roles: []string{"finance"}}

// TestSessionAcrossProcessesAndRestart signs in on one inbox and uses the
// session on another inbox on the same SQLite file (a second process) and
// on one opened after the first closed (a restart); signing out on one ends
// it on all.
func TestSessionAcrossProcessesAndRestart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "inbox.db")
	keys := apiKeys(t, bobKey)
	first := openSQLite(t, path)
	firstURL, stopFirst := serve(t, newInbox(t, first, nil, keys, nil))
	secondURL, _ := serve(t, newInbox(t, openSQLite(t, path), nil, keys, nil))

	bob := visitor(t, firstURL)
	bob.signIn("key_bob")
	if !bob.signedInAs("bob") {
		t.Fatal("not signed in where the session was made")
	}
	if !bob.at(secondURL).signedInAs("bob") {
		t.Fatal("another process on the same store does not honour the session")
	}

	stopFirst()
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	restartedURL, _ := serve(t, newInbox(t, openSQLite(t, path), nil, keys, nil))
	restarted := bob.at(restartedURL)
	if !restarted.signedInAs("bob") {
		t.Fatal("the session did not survive a restart")
	}

	second := bob.at(secondURL)
	tok := second.csrf("/")
	if resp, _ := second.post("/logout", url.Values{"csrf": {tok}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out: %d", resp.StatusCode)
	}
	if bob.at(restartedURL).signedInAs("bob") || bob.at(secondURL).signedInAs("bob") {
		t.Fatal("a signed-out session still opens an inbox")
	}
}

// TestSessionEndsWhenKeyRemoved checks, on every request, that the key a
// session was opened with still stands for the same identity: a process
// whose configuration no longer has the key, or maps it to other roles,
// ends the session, for every process.
func TestSessionEndsWhenKeyRemoved(t *testing.T) {
	t.Parallel()
	for name, after := range map[string][]auth.APIKey{
		"removed":     {{Key: "key_carol", Tenant: "acme", Actor: "carol"}},
		"other roles": {{Key: "key_bob", Tenant: "acme", Actor: "bob", Roles: []string{"finance", "operator"}}},
		"other actor": {{Key: "key_bob", Tenant: "acme", Actor: "robert", Roles: []string{"finance"}}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "inbox.db")
			beforeURL, _ := serve(t, newInbox(t, openSQLite(t, path), nil, apiKeys(t, bobKey), nil))
			afterURL, _ := serve(t, newInbox(t, openSQLite(t, path), nil, apiKeys(t, after...), nil))
			bob := visitor(t, beforeURL)
			bob.signIn("key_bob")
			if !bob.signedInAs("bob") {
				t.Fatal("not signed in")
			}
			if bob.at(afterURL).signedInAs("bob") {
				t.Fatal("a session outlives its key's configuration")
			}
			// It was ended, not just refused there.
			if bob.signedInAs("bob") {
				t.Fatal("the session still opens the inbox that still has the key")
			}
		})
	}
	// A key that stays configured keeps its session.
	st := memstore.New(nil)
	c := visitor(t, must(serve(t, newInbox(t, st, nil, apiKeys(t, bobKey), nil))))
	c.signIn("key_bob")
	for range 3 {
		if !c.signedInAs("bob") {
			t.Fatal("a session with a standing key ended")
		}
	}
}

func must(s string, _ func()) string { return s }

var jwtSecret = []byte("0123456789abcdef0123456789abcdef-web-test")

// TestSessionEndsAtTokenExpiry signs in with a JWT that expires before the
// session's TTL would: the session ends at the token's exp, judged by the
// engine's clock, and its cookie says so.
func TestSessionEndsAtTokenExpiry(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	j, err := auth.NewJWT(auth.JWTConfig{HS256Secret: jwtSecret, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "bob", "tid": "acme", "exp": clock.Now().Add(10 * time.Minute).Unix(),
	}).SignedString(jwtSecret)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := serve(t, newInbox(t, memstore.New(&memstore.Options{Now: clock.Now}), clock.Now, j, func(o *web.Options) { o.SessionTTL = 8 * time.Hour }))
	c := visitor(t, base)
	tok := c.csrf("/login")
	resp, body := c.post("/login", url.Values{"csrf": {tok}, "token": {token}, "next": {"/"}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in with the JWT: %d\n%s", resp.StatusCode, body)
	}
	for _, ck := range resp.Cookies() {
		if ck.Name == "countersign_session" && ck.MaxAge != 600 {
			t.Errorf("session cookie Max-Age %d, want the token's 600 seconds left", ck.MaxAge)
		}
	}
	clock.Advance(10*time.Minute - time.Second)
	if !c.signedInAs("bob") {
		t.Fatal("the session ended before the token expired")
	}
	clock.Advance(time.Second)
	if c.signedInAs("bob") {
		t.Fatal("the session outlived the token's exp")
	}
}

// TestSignInNextHostile checks that hostile next values, from the link and
// from the posted form, send the browser home instead of to another site.
func TestSignInNextHostile(t *testing.T) {
	t.Parallel()
	base, _ := serve(t, newInbox(t, memstore.New(nil), nil, apiKeys(t, bobKey), nil))
	for _, next := range []string{"/%09/evil.example", "//evil.example", "/\\evil.example", "https://evil.example", "/%2F%2Fevil", "/%0d%0a/evil"} {
		c := visitor(t, base)
		_, body := c.get("/login?next=" + url.QueryEscape(next))
		if !strings.Contains(body, `name="next" value="/"`) {
			t.Errorf("next %q: the form carries it on:\n%s", next, body)
		}
		tok := csrfField.FindStringSubmatch(body)[1]
		resp, _ := c.post("/login", url.Values{"csrf": {tok}, "token": {"key_bob"}, "next": {next}}, nil)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
			t.Errorf("next %q: %d to %q, want 303 to /", next, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	c := visitor(t, base)
	tok := c.csrf("/login")
	if resp, _ := c.post("/login", url.Values{"csrf": {tok}, "token": {"key_bob"}, "next": {"/?status=all"}}, nil); resp.Header.Get("Location") != "/?status=all" {
		t.Errorf("a path of the inbox: sent to %q", resp.Header.Get("Location"))
	}
}

// TestSecureCookies checks each mode of Options.SecureCookies over the ways
// a request arrives: directly over TLS or plain HTTP, and from a trusted
// proxy or another peer saying which scheme the client used.
func TestSecureCookies(t *testing.T) {
	t.Parallel()
	type arrival struct {
		tls    bool
		peer   string
		proto  []string // X-Forwarded-Proto headers
		direct bool     // what auto decides
	}
	arrivals := map[string]arrival{
		"plain":                             {peer: "192.0.2.1:5000"},
		"TLS":                               {tls: true, peer: "192.0.2.1:5000", direct: true},
		"untrusted peer says https":         {peer: "192.0.2.1:5000", proto: []string{"https"}},
		"trusted proxy says https":          {peer: "10.1.2.3:5000", proto: []string{"https"}, direct: true},
		"trusted proxy says HTTPS":          {peer: "10.1.2.3:5000", proto: []string{"HTTPS"}, direct: true},
		"trusted proxy says http":           {peer: "10.1.2.3:5000", proto: []string{"http"}},
		"trusted proxy, no header":          {peer: "10.1.2.3:5000"},
		"trusted proxy after client's lie":  {peer: "10.1.2.3:5000", proto: []string{"https, http"}},
		"trusted proxy appends https":       {peer: "10.1.2.3:5000", proto: []string{"http", "https"}, direct: true},
		"trusted IPv6 proxy says https":     {peer: "[2001:db8::7]:5000", proto: []string{"https"}, direct: true},
		"IPv4-mapped trusted proxy":         {peer: "[::ffff:10.1.2.3]:5000", proto: []string{"https"}, direct: true},
		"untrusted IPv6 peer says https":    {peer: "[2001:db9::7]:5000", proto: []string{"https"}},
		"unparsable peer says https":        {peer: "@", proto: []string{"https"}},
		"TLS from a proxy that says http":   {tls: true, peer: "10.1.2.3:5000", proto: []string{"http"}, direct: true},
		"untrusted peer with empty header":  {peer: "192.0.2.1:5000", proto: []string{""}},
		"trusted proxy with an odd scheme":  {peer: "10.1.2.3:5000", proto: []string{"wss"}},
		"trusted proxy says https, spaces":  {peer: "10.1.2.3:5000", proto: []string{" https "}, direct: true},
		"TLS with an untrusted proxy's lie": {tls: true, peer: "192.0.2.1:5000", proto: []string{"http"}, direct: true},
	}
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")}
	for _, mode := range []web.SecureCookies{"", web.SecureCookiesAuto, web.SecureCookiesAlways, web.SecureCookiesNever} {
		in := newInbox(t, memstore.New(nil), nil, apiKeys(t, bobKey), func(o *web.Options) {
			o.SecureCookies, o.TrustedProxies = mode, proxies
		})
		for name, a := range arrivals {
			req := httptest.NewRequest(http.MethodGet, "/login", nil)
			req.RemoteAddr = a.peer
			if a.tls {
				req.TLS = &tls.ConnectionState{}
			}
			for _, p := range a.proto {
				req.Header.Add("X-Forwarded-Proto", p)
			}
			rec := httptest.NewRecorder()
			in.Handler().ServeHTTP(rec, req)
			cookies := rec.Result().Cookies()
			if len(cookies) == 0 {
				t.Fatalf("%s, %s: no cookie set (%d)", mode, name, rec.Code)
			}
			want := a.direct
			switch mode {
			case web.SecureCookiesAlways:
				want = true
			case web.SecureCookiesNever:
				want = false
			}
			for _, ck := range cookies {
				if ck.Secure != want {
					t.Errorf("mode %q, %s: cookie %s Secure %v, want %v", mode, name, ck.Name, ck.Secure, want)
				}
			}
		}
	}
	if _, err := web.New(web.Options{SecureCookies: "sometimes"}); err == nil {
		t.Error("an unknown mode was accepted")
	}
}

// fakeClock is a settable clock for the sign-in limit.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestSignInRateLimit checks that sign-in attempts are limited per client
// address: over the burst, 429 TOO_MANY_REQUESTS with Retry-After; other
// clients are not held back; X-Forwarded-For counts only from a trusted
// proxy, and a client cannot escape its count by adding hops of its own.
func TestSignInRateLimit(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	in := newInbox(t, memstore.New(nil), nil, apiKeys(t, bobKey), func(o *web.Options) {
		o.SignInBurst, o.SignInInterval, o.Now = 3, time.Minute, clock.Now
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	})
	attempt := func(peer string, xff ...string) *http.Response {
		req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(url.Values{"token": {"key_guess"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = peer
		for _, h := range xff {
			req.Header.Add("X-Forwarded-For", h)
		}
		rec := httptest.NewRecorder()
		in.Handler().ServeHTTP(rec, req)
		return rec.Result()
	}
	limited := func(resp *http.Response) bool {
		if resp.StatusCode != http.StatusTooManyRequests {
			return false
		}
		if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 60 {
			t.Errorf("Retry-After %q, want 1..60 seconds", resp.Header.Get("Retry-After"))
		}
		b, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(b), `data-code="TOO_MANY_REQUESTS"`) {
			t.Errorf("the 429 page does not name TOO_MANY_REQUESTS:\n%s", b)
		}
		return true
	}
	burst := func(name, peer string, xff ...string) {
		t.Helper()
		for i := range 3 {
			if limited(attempt(peer, xff...)) {
				t.Fatalf("%s: attempt %d of the burst refused", name, i+1)
			}
		}
		if !limited(attempt(peer, xff...)) {
			t.Fatalf("%s: the attempt after the burst was not refused", name)
		}
	}

	burst("direct client", "192.0.2.1:1000")
	// Another port of the same address is the same client.
	if !limited(attempt("192.0.2.1:2000")) {
		t.Error("another port escaped the limit")
	}
	// A client's own X-Forwarded-For is not believed.
	if !limited(attempt("192.0.2.1:1000", "198.51.100.99")) {
		t.Error("an untrusted peer escaped the limit by naming another address")
	}
	// Others are not held back.
	if limited(attempt("192.0.2.2:1000")) {
		t.Error("another client was refused")
	}

	// Behind a trusted proxy, the client is the last hop that is not one.
	burst("client behind proxies", "10.0.0.1:443", "203.0.113.5, 10.0.0.9")
	if !limited(attempt("10.0.0.2:443", "198.51.100.1, 203.0.113.5")) {
		t.Error("a client escaped the limit by prepending a hop")
	}
	if !limited(attempt("10.0.0.2:443", "198.51.100.1", "203.0.113.5")) {
		t.Error("a client escaped the limit with a header of its own")
	}
	if limited(attempt("10.0.0.2:443", "203.0.113.6")) {
		t.Error("another client behind the proxy was refused")
	}

	// IPv6 clients count by /64.
	burst("IPv6 client", "[2001:db8:1:2::1]:1000")
	if !limited(attempt("[2001:db8:1:2::ffff]:1000")) {
		t.Error("another address of the same /64 escaped the limit")
	}
	if limited(attempt("[2001:db8:1:3::1]:1000")) {
		t.Error("another /64 was refused")
	}

	// One more attempt each interval.
	clock.Advance(time.Minute)
	if limited(attempt("192.0.2.1:1000")) {
		t.Error("refused after the interval")
	}
	if !limited(attempt("192.0.2.1:1000")) {
		t.Error("the interval gave more than one attempt")
	}
}

// TestInboxServesOnlyItsPaths checks that the inbox's handler passes
// nothing on to the API: the API's paths are the process's to mount.
func TestInboxServesOnlyItsPaths(t *testing.T) {
	t.Parallel()
	in := newInbox(t, memstore.New(nil), nil, apiKeys(t, bobKey), nil)
	for _, path := range []string{"/v1/proposals", "/v1/calls", "/healthz", "/metrics", "/openapi.json"} {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer key_bob")
		rec := httptest.NewRecorder()
		in.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "There is no such page.") {
			t.Errorf("%s through the inbox: %d\n%s", path, rec.Code, rec.Body.String())
		}
	}
}
