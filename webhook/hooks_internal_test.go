package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

var secret = []byte("whsec_internal_test_secret")

// received is one request the test backend accepted.
type received struct {
	path   string
	header http.Header
	raw    []byte
	body   map[string]any
}

// testBackend is an httptest server that verifies every request's signature
// with Verify before its handler sees it.
type testBackend struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	reqs     []received
	handlers map[string]http.HandlerFunc
}

func newTestBackend(t *testing.T, handlers map[string]http.HandlerFunc) *testBackend {
	t.Helper()
	b := &testBackend{t: t, handlers: handlers}
	b.srv = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *testBackend) serve(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		b.t.Errorf("read body: %v", err)
		return
	}
	if err := Verify(secret, r.Header.Get(SignatureHeader), raw, time.Now(), 0); err != nil {
		b.t.Errorf("%s: %v", r.URL.Path, err)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
		b.t.Errorf("%s: %s with Content-Type %q", r.URL.Path, r.Method, r.Header.Get("Content-Type"))
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		b.t.Errorf("%s: body %s: %v", r.URL.Path, raw, err)
	}
	b.mu.Lock()
	b.reqs = append(b.reqs, received{path: r.URL.Path, header: r.Header.Clone(), raw: raw, body: body})
	h := b.handlers[r.URL.Path]
	b.mu.Unlock()
	if h == nil {
		http.NotFound(w, r)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	h(w, r)
}

func (b *testBackend) received(path string) []received {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []received
	for _, r := range b.reqs {
		if r.path == path {
			out = append(out, r)
		}
	}
	return out
}

func (b *testBackend) url(path string) string { return b.srv.URL + path }

// reply answers with a status and a JSON body.
func reply(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func newTestCaller(t *testing.T, b *testBackend, spec Spec, opts Options) (*caller, countersign.Hooks) {
	t.Helper()
	if spec.Execute == nil {
		spec.Execute = &Endpoint{URL: b.url("/execute"), Timeout: 2 * time.Second}
	}
	if opts.Secret == nil {
		opts.Secret = secret
	}
	c, hooks, err := newCaller(spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	c.version = "3"
	return c, hooks
}

var alice = countersign.Identity{Tenant: "acme", Actor: "alice", Roles: []string{"agent"}}

func executeRequest() *countersign.ExecuteRequest {
	return &countersign.ExecuteRequest{
		Identity: alice, Action: "payments.refund", Input: json.RawMessage(`{"amount":40,"customer":"c_<9>"}`),
		OperationID: "op_123", StateVersion: "sv_7", ProposalID: "prp_1", Attempt: 1,
	}
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// hijack answers by taking over the connection and writing raw bytes (or
// none), then closing it.
func hijack(raw string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		buf.WriteString(raw)
		buf.Flush()
		conn.Close()
	}
}

// closedURL is the address of a listener that no longer listens: a dial to
// it is refused before any byte is sent.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/execute"
}

type outcome int

const (
	succeeded  outcome = iota
	notApplied         // a definite failure: wraps ErrNotApplied
	uncertain          // any other error
)

func classify(rec *countersign.Receipt, err error) outcome {
	switch {
	case err == nil && rec != nil:
		return succeeded
	case errors.Is(err, countersign.ErrNotApplied):
		return notApplied
	}
	return uncertain
}

func (o outcome) String() string { return [...]string{"succeeded", "not applied", "uncertain"}[o] }

func TestExecuteClassification(t *testing.T) {
	t.Parallel()
	big := `{"receipt":"r","result":{"pad":"` + strings.Repeat("x", MaxResponseBytes) + `"}}`
	cases := []struct {
		name    string
		handler http.HandlerFunc
		url     string // overrides the test backend's
		client  *http.Client
		timeout time.Duration
		want    outcome
		errHas  string
		sent    bool // the backend must have received the request
	}{
		{name: "200", handler: reply(200, `{"receipt":"rf_1","result":{"ok":true}}`), want: succeeded, sent: true},
		{name: "201", handler: reply(201, `{"receipt":"rf_1","result":{"ok":true}}`), want: succeeded, sent: true},
		{name: "200 with charset and extra fields", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			io.WriteString(w, `{"receipt":"rf_1","result":{"ok":true},"extra":1}`)
		}, want: succeeded, sent: true},
		{name: "400", handler: reply(400, `{"error":"amount too large"}`), want: notApplied, errHas: "HTTP 400 Bad Request: {\"error\":\"amount too large\"}", sent: true},
		{name: "404", handler: reply(404, `{}`), want: notApplied, errHas: "HTTP 404", sent: true},
		{name: "409: state moved", handler: reply(409, `{"reason":"state_version changed"}`), want: notApplied, errHas: "state_version changed", sent: true},
		{name: "422", handler: reply(422, `{}`), want: notApplied, errHas: "HTTP 422", sent: true},
		{name: "4xx with a body too large is still definite", handler: reply(400, big), want: notApplied, errHas: "over 1048576 bytes", sent: true},
		{name: "500", handler: reply(500, `{"error":"db down"}`), want: uncertain, errHas: "HTTP 500 Internal Server Error", sent: true},
		{name: "502", handler: reply(502, `bad gateway`), want: uncertain, errHas: "HTTP 502", sent: true},
		{name: "redirect is not followed", handler: func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
		}, want: uncertain, errHas: "HTTP 307", sent: true},
		{name: "time-out after sending", handler: func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done() // the client gives up and closes the connection
		}, timeout: 100 * time.Millisecond, want: uncertain, errHas: "no answer within 100ms", sent: true},
		{name: "connection closed before the response", handler: hijack(""), want: uncertain, sent: true},
		{name: "connection closed mid-response", handler: hijack("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"receipt\":"), want: uncertain, errHas: "unexpected EOF", sent: true},
		{name: "malformed JSON 2xx", handler: reply(200, `{"receipt":`), want: uncertain, errHas: "HTTP 200, but", sent: true},
		{name: "2xx without a receipt", handler: reply(200, `{"result":{}}`), want: uncertain, errHas: "no receipt", sent: true},
		{name: "2xx that is not an object", handler: reply(200, `null`), want: uncertain, errHas: "not a JSON object", sent: true},
		{name: "2xx that is not JSON", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, `{"receipt":"rf_1"}`)
		}, want: uncertain, errHas: "not application/json", sent: true},
		{name: "204 No Content", handler: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }, want: uncertain, sent: true},
		{name: "2xx with a body too large", handler: reply(200, big), want: uncertain, errHas: "over 1048576 bytes", sent: true},
		{name: "connection refused before sending", url: "closed", want: notApplied, errHas: "connection refused"},
		// Without a proxy from the environment, which would answer instead.
		{name: "name lookup fails before sending", url: "http://countersign-webhook-test.invalid/execute", client: &http.Client{Transport: &http.Transport{}}, want: notApplied, errHas: "not sent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newTestBackend(t, map[string]http.HandlerFunc{"/execute": tc.handler})
			ep := &Endpoint{URL: b.url("/execute"), Timeout: cmpOr(tc.timeout, 2*time.Second)}
			switch tc.url {
			case "":
			case "closed":
				ep.URL = closedURL(t)
			default:
				ep.URL = tc.url
			}
			_, hooks := newTestCaller(t, b, Spec{Execute: ep}, Options{Client: tc.client})
			rec, err := hooks.Execute(context.Background(), executeRequest())
			if got := classify(rec, err); got != tc.want {
				t.Fatalf("Execute = %+v, %v: %s, want %s", rec, err, got, tc.want)
			}
			if tc.errHas != "" && (err == nil || !strings.Contains(err.Error(), tc.errHas)) {
				t.Fatalf("error %q does not say %q", err, tc.errHas)
			}
			// net/http's errors name the URL, which may carry a token.
			if err != nil && strings.Contains(err.Error(), "/execute") {
				t.Fatalf("error %q repeats the endpoint URL", err)
			}
			if n := len(b.received("/execute")); tc.sent && n != 1 {
				t.Fatalf("backend received %d executes, want exactly 1", n)
			}
			if n := len(b.received("/elsewhere")); n != 0 {
				t.Fatalf("a redirect was followed")
			}
			if tc.want == succeeded && (rec.ID != "rf_1" || string(rec.Result) != `{"ok":true}`) {
				t.Fatalf("receipt = %+v", rec)
			}
		})
	}
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func TestExecuteRequest(t *testing.T) {
	t.Parallel()
	b := newTestBackend(t, map[string]http.HandlerFunc{"/execute": reply(200, `{"receipt":"rf_1"}`)})
	_, hooks := newTestCaller(t, b, Spec{}, Options{})
	req := executeRequest()
	req.Attempt = 3
	rec, err := hooks.Execute(context.Background(), req)
	if err != nil || rec.ID != "rf_1" || rec.Result != nil {
		t.Fatalf("Execute = %+v, %v", rec, err)
	}
	got := b.received("/execute")[0]
	if k := got.header.Get("Idempotency-Key"); k != "op_123" {
		t.Fatalf("Idempotency-Key = %q, want the operation id", k)
	}
	want := []string{"action", "action_version", "actor", "attempt", "input", "operation_id", "proposal_id", "state_version", "tenant"}
	if !slices.Equal(keys(got.body), want) {
		t.Fatalf("body fields = %v, want %v", keys(got.body), want)
	}
	// The input goes out as the engine holds it, byte for byte.
	const wantRaw = `{"operation_id":"op_123","proposal_id":"prp_1","action":"payments.refund","action_version":"3",` +
		`"input":{"amount":40,"customer":"c_<9>"},"state_version":"sv_7","tenant":"acme","actor":"alice","attempt":3}`
	if string(got.raw) != wantRaw {
		t.Fatalf("body = %s\nwant   %s", got.raw, wantRaw)
	}
}

func TestExecuteWithEndedContextSendsNothing(t *testing.T) {
	t.Parallel()
	b := newTestBackend(t, map[string]http.HandlerFunc{"/execute": reply(200, `{"receipt":"rf_1"}`)})
	_, hooks := newTestCaller(t, b, Spec{}, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec, err := hooks.Execute(ctx, executeRequest())
	if got := classify(rec, err); got != notApplied {
		t.Fatalf("Execute = %v: %s, want not applied", err, got)
	}
	if n := len(b.received("/execute")); n != 0 {
		t.Fatalf("backend received %d requests", n)
	}
}

// roundTripFunc is a transport that reports no progress through httptrace.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestExecuteWithAnUntracedTransport(t *testing.T) {
	t.Parallel()
	// Without progress reports, only a failed dial or lookup proves nothing
	// was sent.
	for name, tc := range map[string]struct {
		err  error
		want outcome
	}{
		"dial refused": {err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, want: notApplied},
		"lookup":       {err: &net.DNSError{Err: "no such host", Name: "backend", IsNotFound: true}, want: notApplied},
		"read reset":   {err: &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}, want: uncertain},
		"anything":     {err: errors.New("boom"), want: uncertain},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) { return nil, tc.err })}
			_, hooks, err := newCaller(Spec{Name: "a", Execute: &Endpoint{URL: "http://backend.example/execute"}}, Options{Secret: secret, Client: client})
			if err != nil {
				t.Fatal(err)
			}
			rec, err := hooks.Execute(context.Background(), executeRequest())
			if got := classify(rec, err); got != tc.want {
				t.Fatalf("Execute = %v: %s, want %s", err, got, tc.want)
			}
		})
	}
}

// A request written in full is never sent again by net/http, even on a
// reused connection that dies before the answer and though the
// Idempotency-Key header makes net/http consider the POST replayable.
func TestExecuteIsNotResentByTheTransport(t *testing.T) {
	t.Parallel()
	b := newTestBackend(t, map[string]http.HandlerFunc{"/execute": func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Idempotency-Key") == "op_ok" {
			reply(200, `{"receipt":"rf_1"}`)(w, r)
			return
		}
		hijack("")(w, r) // read the request, then hang up without a word
	}})
	// A pooled client, so that an execute can reuse a connection.
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	_, hooks := newTestCaller(t, b, Spec{}, Options{Client: client})
	ok := executeRequest()
	ok.OperationID = "op_ok"
	// The connection goes back to the pool a moment after the answer is
	// read: try until the hang-up lands on a reused one.
	for i := 0; ; i++ {
		if _, err := hooks.Execute(context.Background(), ok); err != nil {
			t.Fatal(err)
		}
		var reused atomic.Bool
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { reused.Store(reused.Load() || i.Reused) },
		})
		req := executeRequest()
		req.OperationID = fmt.Sprintf("op_%d", i)
		rec, err := hooks.Execute(ctx, req)
		if got := classify(rec, err); got != uncertain {
			t.Fatalf("Execute = %v: %s, want uncertain", err, got)
		}
		n := 0
		for _, r := range b.received("/execute") {
			if r.body["operation_id"] == req.OperationID {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("backend received %s %d times, want once: it must not be resent", req.OperationID, n)
		}
		if reused.Load() {
			return
		}
		if i == 20 {
			t.Fatal("no execute reused a connection")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPrepare(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		handler http.HandlerFunc
		want    *countersign.Prepared
		code    string // a denial's code
		reason  string
		errHas  string
	}{
		{name: "200", handler: reply(200, `{"preview":"Refund 40 EUR to c_9","state_version":"sv_7"}`),
			want: &countersign.Prepared{Preview: "Refund 40 EUR to c_9", StateVersion: "sv_7"}},
		{name: "200 without a state version", handler: reply(200, `{"preview":"Refund"}`), want: &countersign.Prepared{Preview: "Refund"}},
		{name: "403", handler: reply(403, `{"reason":"alice may not refund c_9"}`), code: countersign.DeniedByAuthorize, reason: "alice may not refund c_9"},
		{name: "409", handler: reply(409, `{"reason":"the order is already refunded"}`), code: countersign.DeniedByPreflight, reason: "the order is already refunded"},
		{name: "422", handler: reply(422, `{"reason":"amount\nexceeds\tthe order"}`), code: countersign.DeniedByPreflight, reason: "amount exceeds the order"},
		{name: "422 without a reason", handler: reply(422, `<html>no</html>`), code: countersign.DeniedByPreflight, reason: "the backend refused to prepare the call (HTTP 422)"},
		{name: "400", handler: reply(400, `{"reason":"no"}`), errHas: "HTTP 400"},
		{name: "500", handler: reply(500, `{}`), errHas: "HTTP 500"},
		{name: "201", handler: reply(201, `{"preview":"x"}`), errHas: "HTTP 201"},
		{name: "malformed", handler: reply(200, `{"preview":`), errHas: "not the JSON expected"},
		{name: "wrong type", handler: reply(200, `{"preview":7}`), errHas: "not the JSON expected"},
		{name: "no preview", handler: reply(200, `{"state_version":"sv"}`), errHas: "no preview"},
		{name: "redirect", handler: func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/elsewhere", http.StatusFound) }, errHas: "HTTP 302"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newTestBackend(t, map[string]http.HandlerFunc{"/prepare": tc.handler, "/elsewhere": reply(200, `{"preview":"x"}`)})
			_, hooks := newTestCaller(t, b, Spec{Prepare: &Endpoint{URL: b.url("/prepare")}}, Options{})
			p, err := hooks.Prepare(context.Background(), &countersign.PrepareRequest{
				Identity: alice, Action: "payments.refund", Input: json.RawMessage(`{"amount":40}`),
			})
			var d *countersign.DeniedError
			switch {
			case tc.want != nil:
				if err != nil || *p != *tc.want {
					t.Fatalf("Prepare = %+v, %v, want %+v", p, err, tc.want)
				}
			case tc.code != "":
				if !errors.As(err, &d) || !errors.Is(err, countersign.ErrDenied) || d.Code != tc.code || d.Reason != tc.reason || d.Action != "payments.refund" {
					t.Fatalf("Prepare = %v (%+v), want %s denial %q", err, d, tc.code, tc.reason)
				}
			default:
				if err == nil || errors.As(err, &d) || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("Prepare = %+v, %v, want an error saying %q", p, err, tc.errHas)
				}
			}
			got := b.received("/prepare")[0]
			if want := []string{"action", "action_version", "actor", "input", "tenant"}; !slices.Equal(keys(got.body), want) {
				t.Fatalf("body fields = %v, want %v", keys(got.body), want)
			}
			if got.body["tenant"] != "acme" || got.body["actor"] != "alice" || got.body["action_version"] != "3" {
				t.Fatalf("body = %s", got.raw)
			}
			if got.header.Get("Idempotency-Key") != "" {
				t.Fatalf("prepare carries an Idempotency-Key")
			}
			if len(b.received("/elsewhere")) != 0 {
				t.Fatalf("a redirect was followed")
			}
		})
	}
}

func TestReconcile(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		handler http.HandlerFunc
		want    *countersign.Reconciliation
		errHas  string
	}{
		{name: "applied", handler: reply(200, `{"status":"applied","receipt":"rf_9"}`),
			want: &countersign.Reconciliation{Status: countersign.ReconcileApplied, Receipt: "rf_9"}},
		{name: "applied with a result", handler: reply(200, `{"status":"applied","receipt":"rf_9","result":{"n":1}}`),
			want: &countersign.Reconciliation{Status: countersign.ReconcileApplied, Receipt: "rf_9", Result: json.RawMessage(`{"n":1}`)}},
		{name: "not applied", handler: reply(200, `{"status":"not_applied"}`), want: &countersign.Reconciliation{Status: countersign.ReconcileNotApplied}},
		{name: "unknown", handler: reply(200, `{"status":"unknown"}`), want: &countersign.Reconciliation{Status: countersign.ReconcileUnknown}},
		{name: "applied without a receipt", handler: reply(200, `{"status":"applied"}`), errHas: "without a receipt"},
		{name: "another status", handler: reply(200, `{"status":"maybe"}`), errHas: `status "maybe"`},
		{name: "no status", handler: reply(200, `{}`), errHas: `status ""`},
		{name: "malformed", handler: reply(200, `{"status"`), errHas: "not the JSON expected"},
		{name: "404", handler: reply(404, `{}`), errHas: "HTTP 404"},
		{name: "500", handler: reply(500, `{}`), errHas: "HTTP 500"},
		{name: "redirect", handler: func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/elsewhere", http.StatusFound) }, errHas: "HTTP 302"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newTestBackend(t, map[string]http.HandlerFunc{"/reconcile": tc.handler, "/elsewhere": reply(200, `{"status":"applied","receipt":"x"}`)})
			_, hooks := newTestCaller(t, b, Spec{Reconcile: &Endpoint{URL: b.url("/reconcile")}}, Options{})
			r, err := hooks.Reconcile(context.Background(), &countersign.ReconcileRequest{
				Identity: alice, Action: "payments.refund", OperationID: "op_123", ProposalID: "prp_1",
			})
			if tc.want != nil {
				if err != nil || r.Status != tc.want.Status || r.Receipt != tc.want.Receipt || string(r.Result) != string(tc.want.Result) {
					t.Fatalf("Reconcile = %+v, %v, want %+v", r, err, tc.want)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("Reconcile = %+v, %v, want an error saying %q", r, err, tc.errHas)
			}
			got := b.received("/reconcile")[0]
			if want := []string{"action", "actor", "operation_id", "proposal_id", "tenant"}; !slices.Equal(keys(got.body), want) {
				t.Fatalf("body fields = %v, want %v", keys(got.body), want)
			}
			if got.body["operation_id"] != "op_123" || got.body["proposal_id"] != "prp_1" || got.body["actor"] != "alice" {
				t.Fatalf("body = %s", got.raw)
			}
			if len(b.received("/elsewhere")) != 0 {
				t.Fatalf("a redirect was followed")
			}
		})
	}
}

func TestEndpointsAreOptionalExceptExecute(t *testing.T) {
	t.Parallel()
	_, hooks, err := newCaller(Spec{Name: "a", Execute: &Endpoint{URL: "https://backend.example/x"}}, Options{Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	if hooks.Execute == nil || hooks.Prepare != nil || hooks.Reconcile != nil {
		t.Fatalf("hooks: execute %v, prepare %v, reconcile %v; want only execute", hooks.Execute != nil, hooks.Prepare != nil, hooks.Reconcile != nil)
	}
}

func TestSignatureUsesTheClock(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var header string
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ = io.ReadAll(r.Body)
		header = r.Header.Get(SignatureHeader)
		reply(200, `{"receipt":"rf_1"}`)(w, r)
	}))
	t.Cleanup(srv.Close)
	_, hooks, err := newCaller(Spec{Execute: &Endpoint{URL: srv.URL}}, Options{Secret: secret, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hooks.Execute(context.Background(), executeRequest()); err != nil {
		t.Fatal(err)
	}
	if header != Sign(secret, at, body) || Verify(secret, header, body, at, 0) != nil {
		t.Fatalf("signature %q, want one made at %v", header, at)
	}
	if Verify(secret, header, body, time.Now(), 0) == nil {
		t.Fatalf("a signature from 2030 verifies now")
	}
}

// Over HTTP/2 the transport reports progress through its own path: a stream
// reset after the request was read must still be uncertain.
func TestExecuteOverHTTP2(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		if err := Verify(secret, r.Header.Get(SignatureHeader), raw, time.Now(), 0); err != nil || r.ProtoMajor != 2 {
			t.Errorf("%s: %v", r.Proto, err)
		}
		switch r.URL.Path {
		case "/ok":
			reply(200, `{"receipt":"rf_1"}`)(w, r)
		case "/conflict":
			reply(409, `{}`)(w, r)
		case "/down":
			reply(503, `{}`)(w, r)
		case "/reset":
			panic(http.ErrAbortHandler) // resets the stream, no answer
		}
	}))
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	client := srv.Client()
	t.Cleanup(client.CloseIdleConnections)
	for path, want := range map[string]outcome{"/ok": succeeded, "/conflict": notApplied, "/down": uncertain, "/reset": uncertain} {
		_, hooks, err := newCaller(Spec{Execute: &Endpoint{URL: srv.URL + path}}, Options{Secret: secret, Client: client})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := hooks.Execute(context.Background(), executeRequest())
		if got := classify(rec, err); got != want {
			t.Errorf("%s: Execute = %v: %s, want %s", path, err, got, want)
		}
	}
}
