package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/webhook"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// receivedSpan is one span an OTLP/HTTP receiver decoded, with the role
// (countersign.role) of the process that exported it.
type receivedSpan struct {
	role  string
	span  *tracepb.Span
	attrs map[string]string
}

func (s receivedSpan) traceID() string  { return hex.EncodeToString(s.span.TraceId) }
func (s receivedSpan) spanID() string   { return hex.EncodeToString(s.span.SpanId) }
func (s receivedSpan) parentID() string { return hex.EncodeToString(s.span.ParentSpanId) }

// otlpReceiver is a collector's OTLP/HTTP traces endpoint: it decodes each
// ExportTraceServiceRequest (protobuf, gzip or not) and keeps its spans.
type otlpReceiver struct {
	t     *testing.T
	mu    sync.Mutex
	spans []receivedSpan
}

func (rc *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		rc.t.Errorf("OTLP export to %s as %q, want /v1/traces as application/x-protobuf", r.URL.Path, r.Header.Get("Content-Type"))
		http.Error(w, "unsupported", http.StatusUnsupportedMediaType)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		rc.t.Errorf("OTLP export: %v", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	for _, rs := range req.ResourceSpans {
		role := attrValues(rs.GetResource().GetAttributes())["countersign.role"]
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				rc.spans = append(rc.spans, receivedSpan{role: role, span: sp, attrs: attrValues(sp.Attributes)})
			}
		}
	}
	rc.mu.Unlock()
	resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(resp)
}

// attrValues renders attributes as strings (ints in decimal).
func attrValues(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = fmt.Sprint(v.IntValue)
		default:
			m[kv.Key] = kv.Value.String()
		}
	}
	return m
}

// inTrace returns the received spans of the trace.
func (rc *otlpReceiver) inTrace(traceID string) []receivedSpan {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []receivedSpan
	for _, s := range rc.spans {
		if s.traceID() == traceID {
			out = append(out, s)
		}
	}
	return out
}

func (rc *otlpReceiver) all() []receivedSpan {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]receivedSpan(nil), rc.spans...)
}

// tracedBackend is a webhook backend that keeps the traceparent of each
// execute it receives.
type tracedBackend struct {
	t        *testing.T
	secret   []byte
	executed chan string // the execute's traceparent
}

func (b *tracedBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := webhook.Verify(b.secret, r.Header.Get(webhook.SignatureHeader), body, time.Now(), time.Minute); err != nil {
		b.t.Errorf("%s: bad signature: %v", r.URL.Path, err)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path != "/execute" {
		http.NotFound(w, r)
		return
	}
	b.executed <- r.Header.Get("traceparent")
	fmt.Fprintf(w, `{"receipt":"rf_%s"}`, m["operation_id"])
}

// testTraceAcrossProcesses follows one call through its trace: an agent's
// request with a traceparent reaches serve, whose call records the
// proposal; serve stops; an approver in this process decides it in a
// trace of its own; a worker process, started afterwards, claims and
// executes it. A real OTLP/HTTP receiver here decodes what every process
// exports: the call's spans, the decision and the worker's claim, execution,
// settlement and webhook request are all in the agent's trace, parented as
// docs/tracing.md says, with the proposal id and the GenAI tool-call
// attributes; the backend receives a traceparent of that trace.
func testTraceAcrossProcesses(t *testing.T, storeSpec string) {
	rc := &otlpReceiver{t: t}
	collector := httptest.NewServer(rc)
	defer collector.Close()
	secret := "s3cret-of-the-tracing-test"
	backend := &tracedBackend{t: t, secret: []byte(secret), executed: make(chan string, 4)}
	ts := httptest.NewServer(backend)
	defer ts.Close()
	t.Setenv("TRACING_WEBHOOK_SECRET", secret)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")

	path := filepath.Join(t.TempDir(), "countersign.yaml")
	cfg := fmt.Sprintf(`store: %q
auth:
  api_keys:
    - {key: tr_key_alice, tenant: acme, actor: alice, roles: [agent], kind: agent}
webhook_secret_env: TRACING_WEBHOOK_SECRET
worker: {poll_interval: 100ms, lease: 5s}
tracing: {otlp_endpoint: %q, sample_ratio: 1}
policy:
  rules:
    - {match: "payments.*", effect: ask, approvers: ["role:finance"], mode: independent}
actions:
  - name: payments.refund
    execute: {url: %s/execute, timeout: 5s}
`, storeSpec, collector.URL, ts.URL)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	// The agent's own trace: its span is the request's parent.
	const agentTrace, agentSpan = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"
	srv := startServer(t, "--config", path)
	req, _ := http.NewRequest(http.MethodPost, srv.base+"/v1/calls",
		strings.NewReader(`{"thread_id":"t1","tool_call_id":"call_tr1","action":"payments.refund","input":{"amount":40}}`))
	req.Header.Set("Authorization", "Bearer tr_key_alice")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+agentTrace+"-"+agentSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var called struct {
		Status     string `json:"status"`
		ProposalID string `json:"proposal_id"`
	}
	err = json.NewDecoder(resp.Body).Decode(&called)
	resp.Body.Close()
	if err != nil || called.Status != "pending" || called.ProposalID == "" {
		t.Fatalf("call: %v %+v\n%s", err, called, srv.output())
	}
	// serve stops before the approval, so that only the worker process can
	// execute it; its last spans are exported as it stops.
	stopRunning(t, srv)
	if !strings.Contains(srv.output(), "trace_id="+agentTrace) {
		t.Errorf("serve's request log line carries no trace_id=%s:\n%s", agentTrace, srv.output())
	}

	// The approver decides in this process, within a trace of its own (as
	// an approver's request to the inbox would be).
	approverTP := sdktrace.NewTracerProvider(sdktrace.WithSyncer(mustExporter(t, collector.URL)),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("countersign.role", "approver"))))
	st, err := openStore(context.Background(), storeSpec, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := countersign.New(countersign.Options{Store: st, TracerProvider: approverTP})
	if err != nil {
		t.Fatal(err)
	}
	actx, approverSpan := approverTP.Tracer("approver").Start(context.Background(), "approver.request")
	dec, err := eng.Decide(actx, &countersign.Decision{Identity: countersign.Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance"}},
		ProposalID: called.ProposalID, Verdict: countersign.Approve})
	approverSpan.End()
	if err != nil || dec.Status != countersign.DecideApplied {
		t.Fatalf("decide: %v %+v", err, dec)
	}
	approverTrace := approverSpan.SpanContext().TraceID().String()

	wrk := startProcess(t, "worker", "--config", path)
	var traceparent string
	select {
	case traceparent = <-backend.executed:
	case <-time.After(30 * time.Second):
		t.Fatalf("the worker did not execute:\n%s", wrk.output())
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		p, err := eng.Proposal(context.Background(), countersign.Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance"}}, called.ProposalID)
		if err == nil && p.Status == cstype.StatusSucceeded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled: %v %v\n%s", p, err, wrk.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopRunning(t, wrk)
	if err := approverTP.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	// The backend was called in the agent's trace.
	parts := strings.Split(traceparent, "-")
	if len(parts) != 4 || parts[1] != agentTrace {
		t.Fatalf("the backend received traceparent %q, want one of trace %s", traceparent, agentTrace)
	}

	spans := rc.inTrace(agentTrace)
	byName := map[string][]receivedSpan{}
	for _, s := range spans {
		byName[s.span.Name] = append(byName[s.span.Name], s)
	}
	one := func(name, role string) receivedSpan {
		t.Helper()
		var got []receivedSpan
		for _, s := range byName[name] {
			if s.role == role {
				got = append(got, s)
			}
		}
		if len(got) != 1 {
			t.Fatalf("%d spans %s from %s in the agent's trace, want 1; the trace holds:\n%s", len(got), name, role, describeSpans(spans))
		}
		return got[0]
	}
	server := one("HTTP POST", "serve")
	call := one("countersign.call", "serve")
	decide := one("countersign.decide", "approver")
	claim := one("countersign.claim", "worker")
	execute := one("countersign.execute", "worker")
	settle := one("countersign.settle", "worker")
	if server.parentID() != agentSpan || server.span.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("serve's request span: parent %s kind %v, want the agent's span %s, a server span", server.parentID(), server.span.Kind, agentSpan)
	}
	if call.parentID() != server.spanID() {
		t.Errorf("call's parent %s, want the request's span %s", call.parentID(), server.spanID())
	}
	// Every span after the call continues the trace from the context the
	// proposal stored: the call's.
	for _, s := range []receivedSpan{decide, claim, execute} {
		if s.parentID() != call.spanID() {
			t.Errorf("%s (%s): parent %s, want the call's span %s", s.span.Name, s.role, s.parentID(), call.spanID())
		}
	}
	if settle.parentID() != execute.spanID() {
		t.Errorf("settle's parent %s, want the execution's span %s", settle.parentID(), execute.spanID())
	}
	if len(decide.span.Links) != 1 || hex.EncodeToString(decide.span.Links[0].TraceId) != approverTrace {
		t.Errorf("decide's links %v, want one to the approver's request in trace %s", decide.span.Links, approverTrace)
	}
	var client *receivedSpan
	for _, s := range spans {
		if s.role == "worker" && s.span.Kind == tracepb.Span_SPAN_KIND_CLIENT {
			client = &s
		}
	}
	if client == nil || client.parentID() != execute.spanID() || parts[2] != client.spanID() {
		t.Errorf("webhook request span %+v: want a client span under the execution whose id the backend received (%s)", client, traceparent)
	}
	for _, s := range []receivedSpan{call, decide, claim, execute, settle} {
		if s.attrs["countersign.proposal.id"] != called.ProposalID {
			t.Errorf("%s: countersign.proposal.id %q, want %s", s.span.Name, s.attrs["countersign.proposal.id"], called.ProposalID)
		}
	}
	for _, s := range []receivedSpan{call, execute} {
		if s.attrs["gen_ai.tool.name"] != "payments.refund" || s.attrs["gen_ai.tool.call.id"] != "call_tr1" || s.attrs["gen_ai.operation.name"] != "execute_tool" {
			t.Errorf("%s: gen_ai attributes %v, want the tool call's", s.span.Name, s.attrs)
		}
	}
	if execute.attrs["countersign.status"] != "succeeded" || decide.attrs["countersign.decision.verdict"] != "approved" {
		t.Errorf("execute status %q, decide verdict %q", execute.attrs["countersign.status"], decide.attrs["countersign.decision.verdict"])
	}
	// No span about the proposal strayed into another trace.
	for _, s := range rc.all() {
		if s.attrs["countersign.proposal.id"] == called.ProposalID && s.traceID() != agentTrace {
			t.Errorf("%s from %s in trace %s, want the agent's %s", s.span.Name, s.role, s.traceID(), agentTrace)
		}
	}
}

func mustExporter(t *testing.T, endpoint string) sdktrace.SpanExporter {
	t.Helper()
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(endpoint+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	return exp
}

// stopRunning stops a process with SIGTERM and waits for it, failing t if
// it did not exit cleanly.
func stopRunning(t *testing.T, s *running) {
	t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.done <- err // for the cleanup
		<-s.read
		if err != nil {
			t.Fatalf("%s exited: %v\n%s", s.cmd.Args[1], err, s.output())
		}
	case <-time.After(40 * time.Second):
		t.Fatalf("%s did not stop", s.cmd.Args[1])
	}
}

func describeSpans(spans []receivedSpan) string {
	var b bytes.Buffer
	for _, s := range spans {
		fmt.Fprintf(&b, "  %s %s span %s parent %s %v\n", s.role, s.span.Name, s.spanID(), s.parentID(), s.attrs)
	}
	return b.String()
}

func TestTraceAcrossProcessesOnSQLite(t *testing.T) {
	testTraceAcrossProcesses(t, "sqlite:"+filepath.Join(t.TempDir(), "tracing.db"))
}

func TestTraceAcrossProcessesOnPostgreSQL(t *testing.T) {
	testTraceAcrossProcesses(t, pgStoreURL(t))
}
