package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/server/auth"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/pgstore"
	"github.com/countersign/countersign/store/sqlitestore"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"go.uber.org/goleak"
)

// TestMain checks, after the tests, that every documented operation was
// exercised through the validating client (when the whole suite ran), and
// that no goroutine outlived its test.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 && flag.Lookup("test.run").Value.String() == "" && !testing.Short() {
		if missing := unexercised(); len(missing) > 0 {
			fmt.Fprintf(os.Stderr, "documented operations no test exercised: %v\n", missing)
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// Identities of the tests. The token is the key of the map; "x_"-prefixed
// tokens belong to another tenant. x_alice has alice's actor name and every
// role, so that only the tenant keeps her out.
var identities = map[string]countersign.Identity{
	"alice":   {Tenant: "acme", Actor: "alice", Roles: []string{"agent"}},
	"bob":     {Tenant: "acme", Actor: "bob", Roles: []string{"finance"}},
	"carol":   {Tenant: "acme", Actor: "carol", Roles: []string{"operator"}},
	"dave":    {Tenant: "acme", Actor: "dave"},
	"x_alice": {Tenant: "globex", Actor: "alice", Roles: []string{"agent", "finance", "operator"}},
	"x_eve":   {Tenant: "globex", Actor: "eve", Roles: []string{"finance", "operator"}},
}

// fakeAuth maps tokens to identities.
type fakeAuth map[string]countersign.Identity

func (f fakeAuth) Authenticate(_ context.Context, token string) (countersign.Identity, error) {
	if token == "broken" {
		return countersign.Identity{}, errors.New("identity provider unreachable")
	}
	id, ok := f[token]
	if !ok {
		return countersign.Identity{}, fmt.Errorf("%w: unknown token", auth.ErrUnauthenticated)
	}
	id.Roles = slices.Clone(id.Roles)
	return id, nil
}

type refundInput struct {
	Amount   float64 `json:"amount"`
	Customer string  `json:"customer"`
}

// testActions are the actions every test engine registers:
//
//   - payments.refund (write; rule: role:finance approves, wait mode,
//     remember run/thread, replacement key {customer});
//   - notes.read (read, no rule: allowed, executes at once);
//   - danger.delete (write; rule: deny);
//   - flaky.write (write; rule: the requester approves; Execute fails with an
//     uncertain error and there is no Reconcile, so it ends unknown);
//   - flaky.reconciled (the same, with a Reconcile that answers unknown, so
//     it stays reconciling);
//   - probe.read (read, allowed, Execute fails uncertainly: unknown without
//     a proposal);
//   - memo.write (write; rule: allow, so it is recorded and runs at once;
//     memoWrites counts its executions by operation id).
func testActions(t testing.TB) []*countersign.Action {
	refund, err := countersign.NewAction(countersign.ActionSpec[refundInput]{
		Name:           "payments.refund",
		Confirmation:   countersign.Confirmation{Title: "Refund {amount} EUR to {customer}", Verb: "Refund"},
		ReplacementKey: "{customer}",
		Execute: func(_ context.Context, _ *countersign.ExecuteRequest, in refundInput) (*countersign.Receipt, error) {
			if in.Customer == "c_fail" {
				return nil, countersign.NotApplied(errors.New("card declined"))
			}
			return &countersign.Receipt{ID: "rf_" + in.Customer, Result: json.RawMessage(fmt.Sprintf(`{"refunded":%g}`, in.Amount))}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	read, err := countersign.NewRawAction(countersign.RawActionSpec{
		Name: "notes.read", Kind: countersign.KindRead,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}`),
		Hooks: countersign.Hooks{Execute: func(_ context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
			return &countersign.Receipt{ID: "note", Result: req.Input}, nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	del, err := countersign.NewRawAction(countersign.RawActionSpec{
		Name: "danger.delete",
		Hooks: countersign.Hooks{Execute: func(context.Context, *countersign.ExecuteRequest) (*countersign.Receipt, error) {
			t.Error("danger.delete executed")
			return &countersign.Receipt{}, nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	flaky, err := countersign.NewRawAction(countersign.RawActionSpec{
		Name: "flaky.write",
		Hooks: countersign.Hooks{Execute: func(context.Context, *countersign.ExecuteRequest) (*countersign.Receipt, error) {
			return nil, errors.New("connection reset after the request was sent")
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	recon, err := countersign.NewRawAction(countersign.RawActionSpec{
		Name: "flaky.reconciled",
		Hooks: countersign.Hooks{
			Execute: func(context.Context, *countersign.ExecuteRequest) (*countersign.Receipt, error) {
				return nil, errors.New("timeout after the request was sent")
			},
			Reconcile: func(context.Context, *countersign.ReconcileRequest) (*countersign.Reconciliation, error) {
				return &countersign.Reconciliation{Status: countersign.ReconcileUnknown}, nil
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	probe, err := countersign.NewRawAction(countersign.RawActionSpec{
		Name: "probe.read", Kind: countersign.KindRead,
		Hooks: countersign.Hooks{Execute: func(context.Context, *countersign.ExecuteRequest) (*countersign.Receipt, error) {
			return nil, errors.New("read timed out")
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	memo, err := countersign.NewRawAction(countersign.RawActionSpec{
		Name: "memo.write",
		Hooks: countersign.Hooks{Execute: func(_ context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
			n, _ := memoWrites.LoadOrStore(req.OperationID, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
			return &countersign.Receipt{ID: "memo_" + req.OperationID, Result: json.RawMessage(`{"written":true}`)}, nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return []*countersign.Action{refund, read, del, flaky, recon, probe, memo}
}

// memoWrites counts the executions of memo.write by operation id
// (*atomic.Int64), in every test.
var memoWrites sync.Map

var testPolicy = countersign.Policy{Rules: []countersign.Rule{
	{Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"},
		Remember: []countersign.Scope{countersign.ScopeRun, countersign.ScopeThread}},
	{Match: "danger.*", Effect: countersign.EffectDeny},
	{Match: "flaky.*", Effect: countersign.EffectAsk, Approvers: []string{"requester"}},
	{Match: "memo.*", Effect: countersign.EffectAllow},
}}

// storeKinds are the drivers every store-dependent test runs on;
// allStoreKinds adds PostgreSQL, for the tests of who may see and do what.
var (
	storeKinds    = []string{"mem", "sqlite"}
	allStoreKinds = []string{"mem", "sqlite", "pg"}
)

// newStore opens an empty store of kind on the clock now (nil: time.Now).
func newStore(t testing.TB, kind string, now func() time.Time) store.Store {
	switch kind {
	case "mem":
		return memstore.New(&memstore.Options{Now: now})
	case "sqlite":
		s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "cs.db"), &sqlitestore.Options{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	case "pg":
		dsn, schema := pgtest.NewSchema(t)
		s, err := pgstore.Open(context.Background(), pgtest.PoolDSN(dsn), &pgstore.Options{Schema: schema, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	t.Fatalf("unknown store %q", kind)
	return nil
}

// harness is a server on a real listener, with a client that validates every
// request and answer against the OpenAPI document.
type harness struct {
	t      testing.TB
	srv    *Server
	engine *countersign.Engine
	// store is the engine's store, which tests read to check what was
	// written (the engine does not hand it out).
	store  store.Store
	url    string
	client *http.Client
}

type harnessOptions struct {
	metrics *Metrics
	server  func(*Options)
	engine  func(*countersign.Options)
	http    func(*http.Server)
	worker  bool
	// workerOpts, if set, changes the options of the worker (with worker).
	workerOpts func(*countersign.WorkerOptions)
	// now, if set, is the clock of the store and the engine, for tests that
	// move time instead of waiting for it.
	now func() time.Time
	// store, if set, is the store instead of a new one of the kind.
	store store.Store
}

func newHarness(t testing.TB, kind string, ho harnessOptions) *harness {
	t.Helper()
	st := ho.store
	if st == nil {
		st = newStore(t, kind, ho.now)
	}
	eo := countersign.Options{
		Store: st, Policy: &testPolicy, Actions: testActions(t),
		WaitPoll: 20 * time.Millisecond, Logger: discard(), Now: ho.now,
	}
	if ho.metrics != nil {
		eo.Observer = ho.metrics
	}
	if ho.engine != nil {
		ho.engine(&eo)
	}
	engine, err := countersign.New(eo)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Engine: engine, Auth: fakeAuth(identities), Logger: discard(), Metrics: ho.metrics}
	if ho.server != nil {
		ho.server(&opts)
	}
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.retryEvery = 50 * time.Millisecond
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.Config = srv.HTTPServer("")
	if ho.http != nil {
		ho.http(ts.Config)
	}
	ts.Start()
	h := &harness{t: t, srv: srv, engine: engine, store: st, url: ts.URL}
	h.client = &http.Client{Transport: &validator{t: t, base: ts.Client().Transport}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if ho.worker {
		wo := countersign.WorkerOptions{PollInterval: 20 * time.Millisecond, LeaseDuration: 5 * time.Second}
		if ho.workerOpts != nil {
			ho.workerOpts(&wo)
		}
		w, err := engine.NewWorker(wo)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = w.Run(ctx) })
	}
	t.Cleanup(func() {
		srv.shutdown()
		cancel()
		wg.Wait()
		ts.CloseClientConnections()
		ts.Close()
	})
	return h
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// response is an answer read whole.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r *response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("answer %d is not a JSON object: %v: %s", r.status, err, r.body)
	}
	return m
}

// errorCode is the code of an error answer.
func (r *response) errorCode(t testing.TB) string {
	t.Helper()
	e, _ := r.json(t)["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

// req describes one request. Invalid marks a request that breaks the
// OpenAPI document on purpose (its answer is still validated); unrouted one
// that no documented route serves; netHTTP one that net/http itself answers
// before any handler runs (neither is validated).
type req struct {
	method, path, token        string
	body                       any // string and []byte are sent as they are
	header                     map[string]string
	invalid, unrouted, netHTTP bool
}

func (h *harness) do(r req) *response {
	h.t.Helper()
	var body io.Reader
	switch b := r.body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		body = bytes.NewReader(j)
	}
	hr, err := http.NewRequest(r.method, h.url+r.path, body)
	if err != nil {
		h.t.Fatal(err)
	}
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if r.token != "" {
		hr.Header.Set("Authorization", "Bearer "+r.token)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	if r.invalid {
		hr.Header.Set(invalidHeader, "1")
	}
	if r.unrouted {
		hr.Header.Set(unroutedHeader, "1")
	}
	client := h.client
	if r.netHTTP {
		client = &http.Client{Transport: h.client.Transport.(*validator).base}
	}
	resp, err := client.Do(hr)
	if err != nil {
		h.t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: b}
}

// must does r and fails the test unless the answer has status want.
func (h *harness) must(want int, r req) *response {
	h.t.Helper()
	resp := h.do(r)
	if resp.status != want {
		h.t.Fatalf("%s %s: status %d, want %d: %s", r.method, r.path, resp.status, want, resp.body)
	}
	return resp
}

// call posts a call and returns its answer's body.
func (h *harness) call(token string, body map[string]any) map[string]any {
	h.t.Helper()
	return h.must(200, req{method: "POST", path: "/v1/calls", token: token, body: body}).json(h.t)
}

// refund is a payments.refund call body in thread t1 (wait mode, no wait).
func refund(toolCall, customer string, amount float64) map[string]any {
	return map[string]any{
		"thread_id": "t1", "run_id": "r1", "tool_call_id": toolCall, "action": "payments.refund",
		"input": map[string]any{"amount": amount, "customer": customer}, "wait_seconds": 0,
	}
}

// pending creates a pending refund proposal requested by alice and returns its id.
func (h *harness) pending(toolCall, customer string) string {
	h.t.Helper()
	res := h.call("alice", refund(toolCall, customer, 40))
	if res["status"] != "pending" {
		h.t.Fatalf("call status %v, want pending: %v", res["status"], res)
	}
	return res["proposal_id"].(string)
}

// The validating client.

const (
	invalidHeader  = "X-Test-Invalid-Request"
	unroutedHeader = "X-Test-Unrouted"
)

var (
	specOnce   sync.Once
	specDoc    *openapi3.T
	specRouter routers.Router
	specErr    error

	exercisedMu sync.Mutex
	exercised   = map[string]bool{} // "METHOD /path" of documented operations
)

// spec loads and validates the embedded OpenAPI document once.
func spec() (*openapi3.T, routers.Router, error) {
	specOnce.Do(func() {
		loader := openapi3.NewLoader()
		specDoc, specErr = loader.LoadFromData(openAPI)
		if specErr != nil {
			return
		}
		if specErr = specDoc.Validate(loader.Context); specErr != nil {
			return
		}
		specRouter, specErr = legacy.NewRouter(specDoc)
	})
	return specDoc, specRouter, specErr
}

// servedOutside are the documented operations that the approver channels'
// packages serve, not server's: their own tests drive them (a Slack click
// signed like Slack's, an email link followed by a plain client and by
// Chromium), on SQLite and PostgreSQL.
var servedOutside = map[string]string{
	"GET /d/{token}":              "channels/email: TestMailScannerAndBrowser, FuzzTokenRoute",
	"POST /d/{token}":             "channels/email: TestMailScannerAndBrowser, TestOneOfAnApproversLinksWins",
	"POST /v1/slack/interactions": "channels/slack: TestAnnounceClickAndUpdate, TestClicksThatDecideNothing, FuzzInteractionHandler",
}

func unexercised() []string {
	doc, _, err := spec()
	if err != nil {
		return []string{err.Error()}
	}
	exercisedMu.Lock()
	defer exercisedMu.Unlock()
	var missing []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if _, ok := servedOutside[method+" "+path]; !ok && !exercised[method+" "+path] {
				missing = append(missing, method+" "+path)
			}
		}
	}
	sort.Strings(missing)
	return missing
}

// validator is an http.RoundTripper that checks every request (unless marked
// invalid) and every answer (always, with its status) against the OpenAPI
// document, so an undocumented route, status or field fails the test.
type validator struct {
	t    testing.TB
	base http.RoundTripper
}

func (v *validator) RoundTrip(r *http.Request) (*http.Response, error) {
	_, router, err := spec()
	if err != nil {
		v.t.Errorf("OpenAPI document: %v", err)
		return v.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	invalid, unrouted := r.Header.Get(invalidHeader) != "", r.Header.Get(unroutedHeader) != ""
	r.Header.Del(invalidHeader)
	r.Header.Del(unroutedHeader)
	var reqBody []byte
	if r.Body != nil {
		if reqBody, err = io.ReadAll(r.Body); err != nil {
			return nil, err
		}
		_ = r.Body.Close()
	}
	reset := func() {
		if r.Body != nil {
			r.Body = io.NopCloser(bytes.NewReader(reqBody))
		}
	}
	reset()
	route, pathParams, err := router.FindRoute(r)
	if err != nil {
		if !unrouted {
			v.t.Errorf("%s %s: no documented route: %v", r.Method, r.URL.Path, err)
		}
		return v.base.RoundTrip(r)
	}
	if unrouted {
		v.t.Errorf("%s %s: marked unrouted, but the document has %s", r.Method, r.URL.Path, route.Path)
	}
	exercisedMu.Lock()
	exercised[route.Method+" "+route.Path] = true
	exercisedMu.Unlock()
	in := &openapi3filter.RequestValidationInput{
		Request: r, PathParams: pathParams, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true},
	}
	if !invalid {
		if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
			v.t.Errorf("%s %s: request does not match the OpenAPI document: %v", r.Method, r.URL.Path, err)
		}
		reset()
	}
	resp, err := v.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// A stream cannot be read whole: check its status and headers.
		out.Options.ExcludeResponseBody = true
		out.Body = io.NopCloser(strings.NewReader(""))
		if err := openapi3filter.ValidateResponse(r.Context(), out); err != nil {
			v.t.Errorf("%s %s: answer %d does not match the OpenAPI document: %v", r.Method, r.URL.Path, resp.StatusCode, err)
		}
		return resp, nil
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(r.Context(), out); err != nil {
		v.t.Errorf("%s %s: answer %d does not match the OpenAPI document: %v\n%s", r.Method, r.URL.Path, resp.StatusCode, err, body)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}
