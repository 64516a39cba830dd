package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/teststores"
	"github.com/countersign/countersign/server"
	"github.com/countersign/countersign/server/auth"
	"github.com/countersign/countersign/web"
)

// The passkey ceremonies' harness: the real server (API and inbox) on a
// durable store, reached at http://localhost:PORT, which is its public URL
// and so the passkeys' relying party (WebAuthn refuses IP addresses).
// Refunds need one finance approver's passkey, wires two.

// pkKeys are the tests' keys, and dave's: a finance approver who never
// enrols a passkey.
var pkKeys = append(append([]auth.APIKey(nil), keys...),
	auth.APIKey{Key: "key_dave", Tenant: "acme", Actor: "dave", Roles: []string{"finance"}})

// captured is a form POST the harness kept from the server.
type captured struct {
	Path   string
	Header http.Header
	Form   url.Values
}

type pkHarness struct {
	t      *testing.T
	url    string
	engine *countersign.Engine
	clock  *testClock
	calls  int

	mu      sync.Mutex
	capture string        // a path whose next POST is kept, not served
	caught  chan captured // where it goes
	gate    string        // a path whose next POST waits for release
	arrived chan struct{}
	release chan struct{}
}

// eachDurable runs test on SQLite, then PostgreSQL: one after the other,
// since each starts browsers.
func eachDurable(t *testing.T, test func(t *testing.T, open teststores.Opener)) {
	t.Helper()
	for _, s := range []struct {
		name string
		open teststores.Opener
	}{{"sqlite", teststores.SQLite}, {"postgres", teststores.Postgres}} {
		t.Run(s.name, func(t *testing.T) { test(t, s.open) })
	}
}

func newPasskeyHarness(t *testing.T, open teststores.Opener) *pkHarness {
	t.Helper()
	clock := &testClock{now: time.Now()}
	h := &pkHarness{t: t, clock: clock}
	// The listener first: its port is part of the public URL the engine
	// needs at its start.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.url = fmt.Sprintf("http://localhost:%d", l.Addr().(*net.TCPAddr).Port)
	var actions []*countersign.Action
	for _, name := range []string{"payments.refund", "payments.wire"} {
		a, err := countersign.NewAction(countersign.ActionSpec[refundInput]{
			Name: name, Confirmation: countersign.Confirmation{Title: "Refund {amount} EUR to {customer}", Verb: "Refund"},
			Execute: func(context.Context, *countersign.ExecuteRequest, refundInput) (*countersign.Receipt, error) {
				return &countersign.Receipt{ID: "rf"}, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		actions = append(actions, a)
	}
	policy := &countersign.Policy{Rules: []countersign.Rule{{
		Match: "payments.refund", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"},
		Mode: countersign.ModeIndependent, StepUp: countersign.StepUpPasskey,
	}, {
		Match: "payments.wire", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}, Quorum: 2,
		Mode: countersign.ModeIndependent, StepUp: countersign.StepUpPasskey,
	}}}
	quiet := slog.New(slog.DiscardHandler)
	engine, err := countersign.New(countersign.Options{Logger: quiet, Now: clock.Now, Store: open(t, clock.Now),
		Policy: policy, Actions: actions, PublicURL: h.url})
	if err != nil {
		t.Fatal(err)
	}
	h.engine = engine
	authn, err := auth.NewAPIKeys(pkKeys)
	if err != nil {
		t.Fatal(err)
	}
	api, err := server.New(server.Options{Engine: engine, Auth: authn, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	inbox, err := web.New(web.Options{Engine: engine, Auth: authn, API: api, Logger: quiet, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", api.Handler())
	mux.Handle("/", h.intercepting(inbox.Handler()))
	hs := &httptest.Server{Listener: l, Config: api.HTTPServer("")}
	hs.Config.Handler = mux
	hs.Start()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Config.Shutdown(sctx)
		hs.Close()
	})
	return h
}

// intercepting serves next, but keeps the next POST to the capture path
// (answering 204, so that the browser stays on its page), and holds the
// next POST to the gate path until release.
func (h *pkHarness) intercepting(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		h.mu.Lock()
		capture, caught := h.capture == r.URL.Path, h.caught
		gate, arrived, release := h.gate == r.URL.Path, h.arrived, h.release
		if capture {
			h.capture = ""
		}
		if gate {
			h.gate = ""
		}
		h.mu.Unlock()
		switch {
		case capture:
			b, _ := io.ReadAll(r.Body)
			form, _ := url.ParseQuery(string(b))
			caught <- captured{Path: r.URL.Path, Header: r.Header.Clone(), Form: form}
			w.WriteHeader(http.StatusNoContent)
			return
		case gate:
			close(arrived)
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// captureNext keeps the next POST to path; the channel receives it.
func (h *pkHarness) captureNext(path string) <-chan captured {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.capture, h.caught = path, make(chan captured, 1)
	return h.caught
}

// gateNext holds the next POST to path: arrived is closed when it comes,
// and it goes on when release is closed.
func (h *pkHarness) gateNext(path string) (arrived, release chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gate, h.arrived, h.release = path, make(chan struct{}), make(chan struct{})
	return h.arrived, h.release
}

// await receives from ch within a deadline.
func await[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("waiting for %s: timed out", what)
	}
	panic("unreachable")
}

// api calls the HTTP API with key and decodes the answer into out (when not
// nil); it returns the status.
func (h *pkHarness) api(method, path, key, body string, out any) int {
	h.t.Helper()
	req, _ := http.NewRequest(method, h.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			h.t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

// call has alice's agent call action through the API; it returns the
// pending proposal's id.
func (h *pkHarness) call(action string, amount float64) string {
	h.t.Helper()
	h.calls++
	var out callAnswer
	body := fmt.Sprintf(`{"thread_id":"t_pk","tool_call_id":"call_%d","action":%q,"input":{"amount":%g,"customer":"c_%d"},"wait_seconds":0}`,
		h.calls, action, amount, h.calls)
	if code := h.api(http.MethodPost, "/v1/calls", "key_alice", body, &out); code != http.StatusOK || out.ProposalID == "" {
		h.t.Fatalf("call %s: %d %+v", action, code, out)
	}
	return out.ProposalID
}

// wireProposal is what the tests read of a proposal through the API.
type wireProposal struct {
	Status    string `json:"status"`
	Decisions []struct {
		Actor    string `json:"actor"`
		Decision string `json:"decision"`
		Via      string `json:"via"`
		StepUp   string `json:"step_up"`
	} `json:"decisions"`
}

// proposal reads a proposal through the API, as bob.
func (h *pkHarness) proposal(id string) *wireProposal {
	h.t.Helper()
	var p wireProposal
	if code := h.api(http.MethodGet, "/v1/proposals/"+id, "key_bob", "", &p); code != http.StatusOK {
		h.t.Fatalf("read %s: %d", id, code)
	}
	return &p
}

// enrollmentLink has olga, an operator, make actor's enrollment link
// through the API (countersign passkeys enroll ACTOR).
func (h *pkHarness) enrollmentLink(actor string) string {
	h.t.Helper()
	var out struct {
		URL string `json:"url"`
	}
	if code := h.api(http.MethodPost, "/v1/passkeys/enrollments", "key_olga", fmt.Sprintf(`{"actor":%q}`, actor), &out); code != http.StatusCreated {
		h.t.Fatalf("enrollment link for %s: %d", actor, code)
	}
	if !strings.HasPrefix(out.URL, h.url+"/passkeys/enroll/") {
		h.t.Fatalf("enrollment link %q: not under the public URL %s", out.URL, h.url)
	}
	return out.URL
}

// client is a cookie-keeping HTTP client of the inbox, signed in with key.
func (h *pkHarness) client(key string) *client {
	h.t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &client{t: h.t, base: h.url, http: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	c.signIn(key)
	return c
}

// authenticator gives the browser's tab a virtual platform authenticator
// with user verification, as a laptop with a fingerprint reader; it returns
// its id.
func authenticator(t *testing.T, ctx context.Context) webauthn.AuthenticatorID {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Call(ctx, webauthn.Enable, webauthn.EnableParams{}); err != nil {
		t.Fatalf("enable the WebAuthn domain: %v", err)
	}
	res, err := chromedp.Call(ctx, webauthn.AddVirtualAuthenticator, webauthn.AddVirtualAuthenticatorParams{
		Options: &webauthn.VirtualAuthenticatorOptions{
			Protocol: webauthn.AuthenticatorProtocolCtap2, Ctap2version: webauthn.Ctap2versionCtap21,
			Transport: webauthn.AuthenticatorTransportInternal, HasResidentKey: true, HasUserVerification: true,
			IsUserVerified: true, AutomaticPresenceSimulation: true,
		},
	})
	if err != nil {
		t.Fatalf("add a virtual authenticator: %v", err)
	}
	return res.AuthenticatorID
}

// removeAuthenticator takes an authenticator away, as a lost laptop.
func removeAuthenticator(t *testing.T, ctx context.Context, id webauthn.AuthenticatorID) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Call(ctx, webauthn.RemoveVirtualAuthenticator, webauthn.RemoveVirtualAuthenticatorParams{AuthenticatorID: id}); err != nil {
		t.Fatalf("remove the virtual authenticator: %v", err)
	}
}

// person is a browser with its own authenticator, signed in with key.
func (h *pkHarness) person(key string) (context.Context, webauthn.AuthenticatorID) {
	h.t.Helper()
	ctx := browser(h.t)
	id := authenticator(h.t, ctx)
	signInBrowser(h.t, ctx, h.url, key)
	return ctx, id
}

// enroll opens actor's enrollment link in ctx and creates a passkey named
// name.
func (h *pkHarness) enroll(ctx context.Context, actor, name string) {
	h.t.Helper()
	link := h.enrollmentLink(actor)
	step(h.t, ctx, actor+" opens the enrollment link", chromedp.Navigate(link))
	waitFor(h.t, ctx, "the enrollment page", `!!document.querySelector("#enroll")`)
	step(h.t, ctx, actor+" creates a passkey",
		chromedp.SendKeys(chromedp.CSS("#name"), name),
		chromedp.Click(chromedp.CSS("#enroll")),
	)
	waitFor(h.t, ctx, "the passkeys page after enrolling", `location.pathname === "/passkeys" && !!document.querySelector(".result") &&
		/enrolled/.test(document.querySelector(".result").textContent)`)
}

// names are the passkeys the passkeys page lists.
func names(t *testing.T, ctx context.Context) string {
	t.Helper()
	return eval[string](t, ctx, `[...document.querySelectorAll("#passkeys .passkey .title")].map(e => e.textContent).join(",")`)
}

// axe runs axe-core on the page, in dark and then light colours, where
// `make web-deps` installed it; CI needs it (as TestAccessibilityInChromium
// does), elsewhere the check alone is skipped.
func axe(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	src, err := os.ReadFile(axeScript)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("axe-core is not installed (%v): run `make web-deps`; CI needs it", err)
		}
		t.Logf("not checking %s with axe-core: %v (run `make web-deps`)", page, err)
		return
	}
	for _, scheme := range []string{"dark", "light"} {
		if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
		}); err != nil {
			t.Fatalf("emulate %s colours: %v", scheme, err)
		}
		checkAxe(t, ctx, page+" ("+scheme+")", string(src))
	}
}
